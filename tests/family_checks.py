"""The checks every family of the sweep must pass (tests/model_zoo.py), shared by the sweep's
test modules (one per kind of model, so that pytest-xdist runs them side by side):

- an honest float32 build compared with PyTorch eager agrees, every kernel paired with the
  very fx node it computes (each layer's call of a shared fused kernel with that layer's
  node), on the unpadded batch and, for text, on a left-padded one;
- a healthy batch (left-padded for text) passes `tvmdbg check`;
- +inf planted in one weight of a later block is the first origin, named by the parameter, at
  a line of the family's own modeling file, in that weight's module;
- an activation converted differently in that later layer only is the first divergence.
"""

from __future__ import annotations

import contextlib
import io
import linecache

import model_zoo

from tvmdbg_tb import analysis
from tvmdbg_tb.cli.main import main as cli_main


def check(logdir) -> tuple[int, str]:
    """`tvmdbg check LOGDIR` in this process: (exit status, what it printed)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        status = cli_main(["check", str(logdir)])
    return status, out.getvalue()


def alerts(logdir) -> dict:
    """analysis.alerts of the run in logdir (its files closed after: a sweep opens hundreds)."""
    import tvmdbg

    with tvmdbg.DebugDataReader(str(logdir)) as reader:
        reader.update()
        return analysis.alerts(reader.run())


def compare_is_clean(name: str, tmp_path, padding: str = "none", mode: str = "FULL_STATS") -> None:
    built = model_zoo.build(name)
    tvm_run = model_zoo.record(built, tmp_path / f"tvm_{padding}", padding=padding, mode=mode)
    reference = model_zoo.record_reference(name, tmp_path / f"torch_{padding}", padding, mode)
    result = analysis.compare(tvm_run, reference, rtol=1e-4, atol=1e-5)
    divergent = [(r["key"], r.get("op_name_b"), r.get("max_abs")) for r in result["ops"] if r["status"] == "divergent"]
    assert result["status"] == "within" and not divergent, divergent
    compared = [r for r in result["ops"] if r["kind"] == "op" and r["status"] != "not_comparable"]
    assert len(compared) >= 15, len(compared)
    assert all(r["key"] == f"main:node {r['op_name_b']}" for r in compared)  # by the node, never a guess
    assert not any("aligned_by" in r for r in result["ops"] if r["kind"] == "op")
    # Every kernel called from several layers is paired with a distinct node at each call site.
    by_kernel: dict[str, dict[int, str]] = {}
    for r in compared:
        by_kernel.setdefault(r["kernel_a"], {})[r["op_id_a"]] = r["op_name_b"]
    shared = {kernel: sites for kernel, sites in by_kernel.items() if len(sites) >= model_zoo.LAYERS}
    assert shared and all(len(set(sites.values())) == len(sites) for sites in shared.values()), shared


def healthy_batch_passes_check(name: str, tmp_path) -> None:
    padding = "left" if model_zoo.is_text(name) else "none"
    logdir = model_zoo.record(model_zoo.build(name), tmp_path, padding=padding)
    status, out = check(logdir)
    assert status == 0, out


def planted_weight_is_named(name: str, tmp_path) -> None:
    plant = model_zoo.planted_weight(name)
    logdir = model_zoo.record(model_zoo.build(name), tmp_path, plant=plant)
    page = alerts(logdir)
    first = page["alerts"][page["first_origin_index"]]
    assert [p["name"] for p in first["bad_parameters"]] == [plant], first
    where = first["location"]
    assert "/transformers/models/" in where["file_path"] and "/modeling_" in where["file_path"], where
    assert linecache.getline(where["file_path"], where["line"]).strip(), where
    assert where["model_node"]["module"] == model_zoo.module_of_parameter(plant), (plant, where["model_node"])
    assert page["origin_alerts"] == 1, [a["op_name"] for a in page["alerts"] if a["origin"]]
    status, out = check(logdir)
    assert status == 1 and where["model_node"]["module"] in out, out


def swapped_activation_is_named(name: str, tmp_path) -> None:
    swap = model_zoo.swapped_activation(name)
    built = model_zoo.build(name, custom_convert_map=swap.convert_map)
    tvm_run = model_zoo.record(built, tmp_path / "tvm", mode="FULL_STATS")
    reference = model_zoo.record_reference(name, tmp_path / "torch")
    result = analysis.compare(tvm_run, reference, rtol=1e-4, atol=1e-5)
    first = result["first_divergence"]
    assert result["status"] == "divergent" and first is not None, result["status"]
    nodes = [
        o["location"]["model_node"]["name"] for o in first["fused_ops_a"] if (o["location"] or {}).get("model_node")
    ]
    assert swap.node in nodes, (swap.node, first["key"], nodes)
    before = [r for r in result["ops"] if r["kind"] == "op" and r["trace_index_a"] < first["trace_index_a"]]
    assert len(before) > 10 and all(r["status"] != "divergent" for r in before)
    where = next(o["location"] for o in first["fused_ops_a"] if o["location"]["model_node"]["name"] == swap.node)
    assert "/transformers/" in where["file_path"], where
    assert f".{model_zoo.PLANTED_LAYER}." in where["model_node"]["module"] + ".", where["model_node"]
