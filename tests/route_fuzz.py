"""Fuzzed parameters for every GET route of the plugin (tests/test_plugin.py on ordinary dumps,
tests/test_hostile_logdirs.py on hostile ones): the routes come from get_plugin_apps and the
parameter names from the plugin's own code, so a new route or parameter is fuzzed too."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLUGIN_SOURCES = [ROOT / "tvmdbg_tb" / "plugin" / "plugin.py", ROOT / "tvmdbg_tb" / "live" / "routes.py"]
PARAM_READ = re.compile(r'(?:_int_param|_required_int)\(request, "(\w+)"|request\.args\.get\("(\w+)"|"(run_[ab])"')
ESCAPES = ["\x1b]0;pwned\x07", "\x1b[2J", "\u202e", "<script>"]


def plugin_params() -> list[str]:
    """Every parameter name a route reads."""
    found = {a or b or c for text in map(Path.read_text, PLUGIN_SOURCES) for a, b, c in PARAM_READ.findall(text)}
    return sorted(found | {"offset", "limit"})


def get_routes(plugin) -> list[str]:
    """Every route of the plugin but its static files."""
    return [r.lstrip("/") for r in plugin.get_plugin_apps() if r not in ("/*", "/index.js")]


def fuzzed_value(rng: random.Random, runs: list[str]) -> str:
    """A value a hostile page could send: numbers out of every range, text that is no number,
    control characters, escapes, run names that are and are not runs."""
    return rng.choice(
        [
            lambda: str(rng.randint(-5, 12)),
            lambda: str(rng.choice([2**31, 2**63, -(2**63) - 1, 2**64, 10**30, 2**62 + 1, -1])),
            lambda: "9" * rng.randint(1, 5000),
            lambda: rng.choice(runs),
            lambda: rng.choice(
                ["", " ", ".", "..", "../..", "/etc/passwd", "\x00", "%00", "NaN", "inf", "-0", "1e3", "0x10"]
            ),
            lambda: rng.choice(
                ["0:2", "::-1", "...", "1,", ",", "[0]", ":" * 50, "0:1:2:3", "1:-1", ",".join(["0"] * 40)]
            ),
            lambda: rng.choice([*ESCAPES, "a" * 70_000]),
            lambda: "".join(chr(rng.randint(1, 0x2FFF)) for _ in range(rng.randint(0, 12))),
        ]
    )()


def fuzz_every_route(server, runs: list[str], seed: int, per_route: int, traces: int = 0) -> dict[int, int]:
    """per_route requests to every GET route of server (tests/test_plugin.py's Server), each
    with up to six fuzzed parameters (a run of `runs` 70% of the time, a trace below `traces`
    half the time on tensor routes). Asserts each answer is a 2xx, or a 4xx whose JSON says
    why, never a 5xx or a traceback; returns the count of each status."""
    rng = random.Random(seed)
    params = plugin_params()
    seen: dict[int, int] = {}
    for route in get_routes(server.plugin):
        for _ in range(per_route):
            asked = {name: fuzzed_value(rng, runs) for name in rng.sample(params, rng.randint(0, 6))}
            if rng.random() < 0.7:
                asked["run"] = rng.choice(runs)
            if traces and route.startswith("tensor/") and rng.random() < 0.5:
                asked["trace"] = str(rng.randrange(traces))
            response = server.get(route, expect=None, **asked)
            status, text = response.status_code, response.get_data(as_text=True)
            seen[status] = seen.get(status, 0) + 1
            assert status < 500 and "Traceback" not in text, (route, asked, text[:300])
            if status >= 400:
                assert json.loads(text)["error"], (route, asked, text[:300])
    return seen
