"""Which of transformers' architectures tvmdbg handles end to end, written to docs/families.md.

Each family of tests/model_zoo.py (and the few more below that the tests leave out) is tried
in its own process, as a user would: torch.export, TVM's from_exported_program, the default
fusing pipeline, one call compared with PyTorch eager (max abs of the output), `tvmdbg compare`
against record_torch_reference (FULL_STATS, unpadded), and `tvmdbg check` on a healthy
left-padded batch (text families). A family that fails says at which stage and with which
error.

    python scripts/family_sweep.py                  # all, then docs/families.md
    python scripts/family_sweep.py --only opt bert  # some, printed only
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

# Families the tests leave out, tried here for the table (model type, kind, overrides).
EXTRA = {
    "mixtral": ("mixtral", "decoder", {"num_local_experts": 4, "num_experts_per_tok": 2}),
    "qwen2_moe": ("qwen2_moe", "decoder", {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64}),
    "mamba": ("mamba", "decoder", {"state_size": 8}),
    "rwkv": ("rwkv", "decoder", {"attention_hidden_size": 64}),
    "xlnet": ("xlnet", "encoder", {"d_model": 64, "n_layer": 4, "n_head": 4, "d_inner": 128}),
    "bart": ("bart", "encoder", {"d_model": 64, "encoder_layers": 4, "decoder_layers": 1}),
}


def probe(name: str) -> dict:
    """One family through every stage; what it reached, its figures, or its error."""
    warnings.filterwarnings("ignore")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import model_zoo as zoo

    if name in EXTRA:
        model_type, kind, overrides = EXTRA[name]
        zoo.FAMILIES[name] = zoo.Family(model_type, kind, tuple(sorted(overrides.items())))
    out: dict = {"family": name, "kind": zoo.FAMILIES[name].kind}
    stage = "export"
    try:
        zoo.exported(name)
        stage = "import and compile"
        built = zoo.build(name)
        stage = "run"
        work = tempfile.mkdtemp(prefix="tvmdbg_sweep_")
        feed = zoo.inputs(name)
        got, want = built.run(feed), zoo.reference_outputs(name, feed)
        out["max_abs"] = float(abs(got - want).max())
        stage = "compare"
        from tvmdbg_tb import analysis

        run = zoo.record(built, os.path.join(work, "tvm"), mode="FULL_STATS")
        result = analysis.compare(run, zoo.record_reference(name, os.path.join(work, "ref")), rtol=1e-4, atol=1e-5)
        out["compare"] = result["status"]
        first = result.get("first_divergence")
        if first:
            out["first_divergence"] = first["key"]
        out["compared"] = sum(1 for r in result["ops"] if r["kind"] == "op" and r["status"] != "not_comparable")
        if zoo.is_text(name):
            stage = "check"
            status, text = _check(zoo.record(built, os.path.join(work, "padded"), padding="left"))
            out["check"] = status
            if status:
                out["check_says"] = text.split(". Look closer")[0][-400:]
        stage = ""
    except Exception as error:  # the table says where and why
        out["stage"] = stage
        out["error"] = (f"{type(error).__name__}: {error}".strip().splitlines() or [type(error).__name__])[0][:200]
    return out


def _check(logdir: str) -> tuple[int, str]:
    import contextlib
    import io

    from tvmdbg_tb.cli.main import main

    text = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):
        status = main(["check", logdir])
    return status, text.getvalue()


def _row(result: dict) -> str:
    name, kind = result["family"], result.get("kind", "")
    if "error" in result:
        return f"| {name} | {kind} | no: {result['stage']} fails | `{result['error'].replace('|', '/')}` |"
    bits = [f"output max abs {result['max_abs']:.1e} vs PyTorch", f"compare {result['compare']}"]
    if "first_divergence" in result:
        bits.append(f"first divergence {result['first_divergence']}")
    if "check" in result:
        bits.append("padded batch passes check" if result["check"] == 0 else f"check exits {result['check']}")
    ok = result["compare"] == "within" and result.get("check", 0) == 0
    return f"| {name} | {kind} | {'yes' if ok else 'see note'} | {'; '.join(bits)} |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", help="these families only (printed, docs untouched)")
    parser.add_argument("--probe", help=argparse.SUPPRESS)  # the child's side: one family
    args = parser.parse_args()
    if args.probe:
        print("RESULT " + json.dumps(probe(args.probe)))
        return 0
    import model_zoo

    names = args.only or [*model_zoo.FAMILIES, *EXTRA]
    results = []
    for name in names:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, __file__, "--probe", name], capture_output=True, text=True, timeout=900)
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        result = (
            json.loads(lines[-1][7:]) if lines else {"family": name, "stage": "process", "error": done.stderr[-200:]}
        )
        result["seconds"] = round(time.perf_counter() - start, 1)
        print(json.dumps(result), flush=True)
        results.append(result)
    if not args.only:
        _write(results)
    return 0


def _write(results: list[dict]) -> None:
    rows = "\n".join(_row(r) for r in results)
    import transformers
    import tvm

    path = os.path.join(ROOT, "docs", "families.md")
    with open(path) as f:
        text = f.read()
    head, _, rest = text.partition("<!-- table -->")
    _, _, tail = rest.partition("<!-- /table -->")
    versions = f"transformers {transformers.__version__}, apache-tvm {tvm.__version__}"
    table = f"<!-- table -->\n_{versions}; `python scripts/family_sweep.py`_\n\n| family | kind | end to end | what it gave |\n|---|---|---|---|\n{rows}\n<!-- /table -->"
    with open(path, "w") as f:
        f.write(head + table + tail)


if __name__ == "__main__":
    raise SystemExit(main())
