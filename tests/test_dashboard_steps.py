"""Steps in the tab: a generation loop's calls are labelled by their function and the step its VM
counted ("decode · step 4"), on the timeline's tiles and in the alert rows, the same numbers as
the CLI's "(embed, call 7)"; the first origin says in words which call and which weight. examples/generate_paged_kv.py's decoder, a NaN row read at the
sixth decode step, in a real TensorBoard driven by Chromium."""

from __future__ import annotations

import re
import time
import urllib.error

import llm_models
import pytest
from test_dashboard_e2e import Browser, TensorBoardProcess

import tvmdbg

pytestmark = pytest.mark.browser

DECODES = 8
PLANTED_AT = 6  # the decode step that feeds the token whose embedding row is NaN


@pytest.fixture(scope="module")
def loop_dump(tmp_path_factory):
    example = llm_models.paged_example()
    with llm_models.recording("FULL_HEALTH"):
        executable, names = example.build()
    logdir = tmp_path_factory.mktemp("steps")
    tvmdbg.enable_dump_debug_info(str(logdir), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    try:
        model = example.Generator(executable, example.weights(executable, names, plant=True))
        token = model.prefill(example.PROMPT[:2])
        for step in range(1, DECODES + 1):
            token = model.decode(example.PLANTED_TOKEN if step == PLANTED_AT else token % 40 + 1)
    finally:
        tvmdbg.disable_dump_debug_info()
    return logdir


def test_timeline_and_alerts_name_each_call_by_its_step(loop_dump, tmp_path):
    done = llm_models.check(loop_dump)
    # prefill's embed is embed's call 1, decode step k's is call k + 1
    assert done.returncode == 1 and f"(embed, call {PLANTED_AT + 1})" in done.stdout, done.stdout
    run = llm_models.read_run(loop_dump)
    digests = run.execution_digests()
    expected = {
        int(d["index"]): f"{run.function_names[int(d['function'])]} · step {int(d['call_number'])}" for d in digests
    }
    tb = TensorBoardProcess(loop_dump, tmp_path / "tensorboard.log")
    browser = Browser()
    try:
        deadline = time.time() + 60
        while not tb.api("runs")["runs"]:
            assert time.time() < deadline, "the plugin never listed the run"
            time.sleep(0.3)
        # The route the box asks: one function's calls, or its VM's call of one number.
        name = tb.api("runs")["runs"][0]["run"]
        found = tb.api(f"execution/digests?run={name}&function=decode&call=5")
        assert [(r["function_name"], r["call_number"]) for r in found["execution_digests"]] == [("decode", 5)]
        assert tb.api(f"execution/digests?run={name}&function=decode")["num_digests"] == DECODES
        for bad in ("function=decode&call=0", "call=5", "function=decode&call=x"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                tb.api(f"execution/digests?run={name}&{bad}")
            assert refused.value.code == 400, bad
        frame = browser.open_dashboard(tb)
        origin = frame.locator(".alert-item.origin").first
        origin.wait_for(timeout=60_000)
        assert f"embed · step {PLANTED_AT + 1} · " in origin.inner_text(), origin.inner_text()
        # The origin in words: which call, which weight.
        words = frame.locator("[data-testid=first-origin-alert] [data-testid=origin-words]").inner_text()
        assert words == (
            f"In embed · step {PLANTED_AT + 1}: the first op to read the weight embed_tokens.weight, which held NaN/∞."
        ), words
        tiles = frame.locator(".timeline-panel .tl-item")
        tiles.first.wait_for(timeout=60_000)
        shown = {int(t.get_attribute("data-index")): t.locator(".tl-label").inner_text() for t in tiles.all()}
        assert shown and all(expected[index] == label for index, label in shown.items()), shown
        decode_labels = [label for label in shown.values() if label.startswith("decode")]
        assert [int(re.search(r"step (\d+)", x).group(1)) for x in decode_labels] == list(
            range(1, len(decode_labels) + 1)
        )
        # One selection: a decode tile moves the graph to that call, named by its step.
        decode_3 = next(index for index, label in shown.items() if label == "decode · step 3")
        frame.locator(f".timeline-panel .tl-item[data-index='{decode_3}']").click()
        note = frame.locator("[data-testid=graph-note]")
        note.filter(has_text=re.compile("^decode · step 3$")).wait_for(timeout=60_000)
        # Enter on the first-origin box goes to the origin and keeps the focus on the box.
        box = frame.locator("[data-testid=first-origin-alert]")
        box.focus()
        box.press("Enter")
        note.filter(has_text=re.compile(f"^embed · step {PLANTED_AT + 1}$")).wait_for(timeout=60_000)
        assert box.evaluate("(el) => el === document.activeElement"), "the focus left the first-origin box"
        # Go to a step by its name, as the CLI says it; a step the dump does not hold says so.
        goto = frame.locator("[data-testid=go-to-call]")
        goto.fill("decode 5")
        goto.press("Enter")
        note.filter(has_text=re.compile("^decode · step 5$")).wait_for(timeout=60_000)
        decode_5 = next(index for index, label in shown.items() if label == "decode · step 5")
        frame.locator(f".timeline-panel .tl-item.selected[data-index='{decode_5}']").wait_for(timeout=60_000)
        goto.fill("decode 99")
        goto.press("Enter")
        frame.locator("[data-testid=go-to-miss]", has_text="No call decode · step 99 in the dump.").wait_for()
        assert browser.errors == [], browser.errors
    finally:
        browser.close()
        tb.close()
