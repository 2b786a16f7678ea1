"""The device check: what tvmdbg does on a CUDA GPU, run the day one is available.

    TVM_NUM_THREADS=1 python bench/gpu/device_check.py [--json out.json]

On a machine with a CUDA GPU and this package installed it runs, on the device:
- `device_kernels`: the device summary kernels (tvmdbg_tb/capture/device_kernels.py) on planted
  arrays of every dtype, against numpy's exact counts and finite statistics;
- `planted_nan`: a small model built for CUDA while tvmdbg records (FULL_HEALTH), called on an
  input holding a NaN: the dump must hold an origin alert at the op that made it;
- `healthy`: the same model on finite inputs: no alert;
- `overhead`: a chain of 200 tiny kernels built for CUDA, plain and traced calls alternating:
  the added µs per kernel (a figure, no verdict).
It prints one line per check, `<name>: pass|FAIL|skipped (<why>)`, and the figures; with no
CUDA device every check is skipped and every figure stays empty, so nothing here can claim a
GPU result it did not measure. Exit status: 1 if a check failed, else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

CHECKS = ("device_kernels", "planted_nan", "healthy", "overhead")


def _device():
    import tvm

    device = tvm.cuda(0)
    return device if device.exist else None


def _target():
    import tvm

    return tvm.target.Target.from_device(tvm.cuda(0))


def check_device_kernels(device) -> tuple[bool, dict]:
    import numpy as np
    import tvm

    from tvmdbg_tb.capture import device_kernels as dk
    from tvmdbg_tb.capture.kernel_source import ROW_WIDTH, STATS_COLUMN
    from tvmdbg_tb.events.summaries import finite_statistics

    rng = np.random.default_rng(0)
    ok = True
    for dtype in ("float16", "float32", "float64", "int32"):
        kernel = tvm.compile(tvm.IRModule({"k": dk.schedule(dk.definition(dtype, True))}), target=_target())
        for size in (1, dk.THREADS + 1, 2 * dk.BLOCKS * dk.THREADS + 17):
            values = (rng.standard_normal(size) * 4).astype(dtype)
            if dtype != "int32":
                values[rng.integers(0, size, 3)] = np.nan
            row = tvm.runtime.tensor(np.zeros((1, ROW_WIDTH)), device=device)
            kernel[dk.kernel_name(dtype, True)](tvm.runtime.tensor(values, device=device), row, 0)
            got = row.numpy()[0]
            wide = values.astype(np.float64)
            counts = [
                (wide < 0).sum(),
                (wide > 0).sum(),
                (wide == 0).sum(),
                np.isneginf(wide).sum(),
                np.isposinf(wide).sum(),
            ]
            ok &= got[list(dk.COUNT_COLUMNS)].tolist() == [float(c) for c in counts]
            ok &= bool(np.allclose(got[STATS_COLUMN : STATS_COLUMN + 5], finite_statistics(wide), equal_nan=True))
    return ok, {}


def _small_model():
    from tvm import relax
    from tvm.script import relax as R

    builder = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((64, 64), "float32"))
    with builder.function("main", [x]):
        with builder.dataflow():
            y = builder.emit(relax.op.log(x))
            z = builder.emit(relax.op.multiply(y, y))
            out = builder.emit_output(relax.op.add(z, x))
        builder.emit_func_output(out)
    return builder.get()


def _cuda_build(mod):
    import tvm
    from tvm import relax

    target = _target()
    with target:
        mod = relax.transform.LegalizeOps()(mod)
        mod = tvm.s_tir.dlight.ApplyDefaultSchedule(tvm.s_tir.dlight.gpu.Fallback())(mod)
    return tvm.compile(mod, target=target)


def _alerts_of(values, device) -> list:
    import tvm
    from tvm import relax

    import tvmdbg
    from tvmdbg_tb import analysis

    with tempfile.TemporaryDirectory() as logdir:
        tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
        try:
            vm = relax.VirtualMachine(_cuda_build(_small_model()), device)
            vm["main"](tvm.runtime.tensor(values, device=device))
        finally:
            tvmdbg.disable_dump_debug_info()
        reader = tvmdbg.DebugDataReader(logdir)
        reader.update()
        return analysis.alerts_page(reader.run()).alerts


def check_planted_nan(device) -> tuple[bool, dict]:
    import numpy as np

    values = np.ones((64, 64), "float32")
    values[3, 5] = -1.0  # log(-1): NaN, made by the log
    alerts = _alerts_of(values, device)
    origins = [a for a in alerts if a.origin]
    return bool(origins) and "log" in origins[0].op_name, {"alerts": len(alerts), "origins": len(origins)}


def check_healthy(device) -> tuple[bool, dict]:
    import numpy as np

    return not _alerts_of(np.ones((64, 64), "float32"), device), {}


def check_overhead(device) -> tuple[bool, dict]:
    """Added µs per kernel on a chain of 200 tiny kernels (a figure; no verdict)."""
    import numpy as np
    import tvm
    from tvm import relax
    from tvm.script import relax as R

    import tvmdbg

    def chain():
        builder = relax.BlockBuilder()
        x = relax.Var("x", R.Tensor((16,), "float32"))
        with builder.function("main", [x]):
            with builder.dataflow():
                value = x
                for _ in range(200):
                    value = builder.emit(relax.op.add(value, relax.const(1.0, "float32")))
                out = builder.emit_output(value)
            builder.emit_func_output(out)
        return builder.get()

    data = tvm.runtime.tensor(np.zeros(16, "float32"), device=device)
    plain = relax.VirtualMachine(_cuda_build(chain()), device)
    with tempfile.TemporaryDirectory() as logdir:
        tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode="FULL_HEALTH", circular_buffer_size=1000)
        try:
            traced = relax.VirtualMachine(_cuda_build(chain()), device)
            times: dict[str, list[float]] = {"plain": [], "traced": []}
            for _ in range(50):
                for name, vm in (("plain", plain), ("traced", traced)):
                    start = time.perf_counter()
                    vm["main"](data)
                    device.sync()
                    times[name].append(time.perf_counter() - start)
        finally:
            tvmdbg.disable_dump_debug_info()
    plain_us, traced_us = (statistics.median(times[k]) * 1e6 for k in ("plain", "traced"))
    return True, {"plain_us": plain_us, "traced_us": traced_us, "added_us_per_kernel": (traced_us - plain_us) / 200}


RUNNERS: dict[str, Callable] = {
    "device_kernels": check_device_kernels,
    "planted_nan": check_planted_nan,
    "healthy": check_healthy,
    "overhead": check_overhead,
}


def run_checks(device) -> dict[str, dict]:
    """Each check's {"verdict": "pass" | "FAIL" | "skipped", "why": ..., "figures": {...}}."""
    results = {}
    for name in CHECKS:
        if device is None:
            results[name] = {"verdict": "skipped", "why": "no CUDA device", "figures": {}}
            continue
        try:
            ok, figures = RUNNERS[name](device)
            results[name] = {"verdict": "pass" if ok else "FAIL", "why": "", "figures": figures}
        except Exception as error:  # a check that cannot run says why, the others still run
            results[name] = {"verdict": "FAIL", "why": f"{type(error).__name__}: {error}", "figures": {}}
    return results


def report(results: dict[str, dict]) -> list[str]:
    lines = []
    for name, result in results.items():
        why = f" ({result['why']})" if result["why"] else ""
        figures = " ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in result["figures"].items())
        lines.append(f"{name}: {result['verdict']}{why}" + (f"  {figures}" if figures else ""))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default="", help="also write the results to this file")
    options = parser.parse_args(argv)
    os.environ.setdefault("TVM_NUM_THREADS", "1")
    results = run_checks(_device())
    print("\n".join(report(results)))
    if options.json:
        with open(options.json, "w") as out:
            json.dump(results, out, indent=1)
    return 1 if any(r["verdict"] == "FAIL" for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
