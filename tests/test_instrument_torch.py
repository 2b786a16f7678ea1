"""The PyTorch importer (optional: skipped without torch): the user line comes from the fx
node's stack trace."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tvm  # noqa: E402
from models import X, Y, compile_module, line_of  # noqa: E402
from tvm import relax  # noqa: E402

import tvmdbg  # noqa: E402
from tvmdbg_tb.events.reader import NONFINITE  # noqa: E402


class _Net(torch.nn.Module):
    # The relu comes after a matmul, in another kernel even with fusion: a NaN made and hidden
    # inside one fused kernel never reaches a kernel output (see the README's limitations).
    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.eye(8))

    def forward(self, x, y):
        h = x - y
        bad = torch.log(h)  # planted: torch log
        return torch.relu(torch.matmul(bad * 2.0, self.w)) + x


@pytest.mark.parametrize("fuse", [False, True])
def test_torch_importer_maps_to_the_forward_line(tmp_path, fuse):
    from tvm.relax.frontend.torch import from_exported_program

    tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode="CONCISE_HEALTH")
    try:
        exported = torch.export.export(_Net(), (torch.from_numpy(X), torch.from_numpy(Y)))
        mod = from_exported_program(exported)
        vm = relax.VirtualMachine(compile_module(mod, fuse), tvm.cpu())
        vm["main"](tvm.runtime.tensor(X), tvm.runtime.tensor(Y))
    finally:
        tvmdbg.disable_dump_debug_info()
    with tvmdbg.DebugDataReader(tmp_path) as reader:
        reader.update()
        run = reader.run()
        digests = run.trace_digests()
        first = run.trace(int(np.flatnonzero(digests["flags"] & NONFINITE)[0]))
        logs = [o for o in run.op(first.op_id).original_ops if o.op_type == "relax.log"]
        assert logs
        frame = run.user_frame(logs[0].code_location)
        assert frame.file_path == __file__ and frame.line == line_of(__file__, "# planted: torch log")
