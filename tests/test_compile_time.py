"""The compile-time instrumentation's shortcuts give what the long way gives, on real builds.

A build is described, instrumented and registered in walks whose cost per call site is kept
low by shortcuts: a site's summary kernel chosen from the output spec the graph walk read
(compiled._site_kernel) instead of the lowered value's type, op records composed from
serialized pieces (op_records.OpEncoder) instead of the protobuf API, and the cyclic
collector paused during the walks (capture._CollectorPaused). Each is checked here against
the long way on models compiled and run for real. (Cached tensor specs are checked against
TVM's printer in test_graph_specs.py.)
"""

from __future__ import annotations

import gc

import models
import pytest

import tvmdbg
from tvmdbg_tb.capture import compiled
from tvmdbg_tb.capture import hooks as capture
from tvmdbg_tb.events.options import DumpOptions
from tvmdbg_tb.events.writer import DebugEventsWriter
from tvmdbg_tb.proto import debug_event_pb2 as pb
from tvmdbg_tb.tracing.op_records import OpEncoder
from tvmdbg_tb.tracing.session import Session


def _chain():
    return models.chain(12)[0]


def _fused_chain():
    return models.chain(12, fuse=True)[0]


def _mixed():
    return models.mixed_dtypes()[0]


def _cnn():
    return models.small_cnn()[0]


def _transformer():
    return models.transformer_block(tokens=8, dim=32)[0]


def _training():
    return models.digits_training()  # parameters and gradients as tuples


def _planted():
    return models.planted("tvmscript", "div", False).executable  # locations from spans


BUILDERS = [_chain, _fused_chain, _mixed, _cnn, _transformer, _training, _planted]


@pytest.fixture(autouse=True)
def _disabled():
    yield
    tvmdbg.disable_dump_debug_info()


@pytest.mark.parametrize("mode", ["FULL_HEALTH", "SHAPE", "FULL_STATS"])
@pytest.mark.parametrize("build", BUILDERS, ids=lambda b: b.__name__.strip("_"))
def test_site_kernels_from_specs_equal_those_of_the_lowered_types(tmp_path, monkeypatch, build, mode):
    """Every instrumented output's summary kernel, chosen from the site's output spec, is the
    one the lowered module's type of that output gives."""
    chosen = []
    site_kernel = compiled._site_kernel

    def checked(site, slot, out, stats, counts):
        name = site_kernel(site, slot, out, stats, counts)
        chosen.append((site.name, slot, name, compiled._health_kernel(out, stats, counts=counts)))
        return name

    monkeypatch.setattr(compiled, "_site_kernel", checked)
    tvmdbg.enable_dump_debug_info(str(tmp_path), tensor_debug_mode=mode, circular_buffer_size=-1)
    build()
    assert chosen, "no site was instrumented"
    assert [c[:3] for c in chosen] == [c[:2] + c[3:] for c in chosen]
    assert any(name is not None for _, _, name, _ in chosen)


def _reference_op(session: Session, op_id: int, graph_id: int, site, op_ids: list[int]) -> pb.GraphOpCreation:
    """The op record built field by field with the protobuf API (the long way)."""
    op = pb.GraphOpCreation(
        op_id=op_id,
        graph_id=graph_id,
        op_name=site.name,
        kernel=site.kernel,
        call_type=site.call_type,
        outputs=[session._spec(s) for s in site.outputs],
        output_names=site.output_names,
        device="cpu:0",
        position=site.position,
    )
    first_located = None
    for origin in site.origins:
        location = session.code_location(origin.frames, origin.user_index)
        op.original_ops.add(op_type=origin.op_type, var_name=origin.var_name, code_location=location)
        if first_located is None and location.stack_frame_ids:
            first_located = location
    if first_located is not None:
        op.code_location.CopyFrom(first_located)
    for item in site.inputs:
        entry = op.inputs.add(kind=item.kind, name=item.name, spec=session._spec(item.spec))
        if item.kind == pb.OpInput.OP_OUTPUT:
            entry.producer_op_id = op_ids[item.producer_position]
            entry.producer_output_slot = item.producer_slot
        elif item.kind == pb.OpInput.PARAM:
            entry.param_index = item.param_index
            if item.tuple_item >= 0:
                entry.tuple_item = item.tuple_item
    for member, flow in zip(site.member_origins, site.member_flow):
        op.fused_members.add(
            op_type=member.op_type if member is not None and member.op_type else flow.op_type,
            input_refs=flow.input_refs,
            nonfinite_literal=bool(flow.literal or (member is not None and member.nonfinite_literal)),
        )
    return op


def test_composed_op_records_equal_the_protobuf_api(tmp_path, monkeypatch):
    """On the sites of real builds (fused kernels of several ops, tuple parameters, inputs of
    every kind, TVMScript spans), the composed record is the message the protobuf API builds,
    to the byte; and a record of other ids or another site differs."""
    infos = []
    attach = capture.attach
    monkeypatch.setattr(capture, "attach", lambda executable, info: (infos.append(info), attach(executable, info)))
    tvmdbg.enable_dump_debug_info(str(tmp_path / "dump"), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    for build in BUILDERS:
        build()
    tvmdbg.disable_dump_debug_info()
    assert len(infos) >= len(BUILDERS)
    writer = DebugEventsWriter(
        str(tmp_path / "records"), DumpOptions(tensor_debug_mode=pb.FULL_HEALTH, circular_buffer_size=-1)
    )
    try:
        session = Session(writer.options, writer=writer)
        encoder = OpEncoder(session._spec)
        kinds, checked, tuple_items, multi_origin = set(), 0, 0, 0
        for info in infos:
            assert info is not None and info.functions
            for function in info.functions.values():
                op_ids = [1000 + 7 * i for i in range(len(function.sites))]
                for site, op_id in zip(function.sites, op_ids):
                    locations = [session.code_location(o.frames, o.user_index) for o in site.origins]
                    event = encoder.event(op_id, 3, site, locations, op_ids)
                    expected = _reference_op(session, op_id, 3, site, op_ids)
                    assert event.WhichOneof("what") == "graph_op_creation"
                    assert event.graph_op_creation == expected
                    assert event.graph_op_creation.SerializeToString() == expected.SerializeToString()
                    assert encoder.event(op_id + 1, 3, site, locations, op_ids).graph_op_creation != expected
                    kinds |= {item.kind for item in site.inputs}
                    tuple_items += sum(item.tuple_item >= 0 for item in site.inputs)
                    multi_origin += len(site.origins) > 1
                    checked += 1
        assert checked > 50
        assert {pb.OpInput.OP_OUTPUT, pb.OpInput.PARAM, pb.OpInput.CONSTANT} <= kinds
        assert tuple_items and multi_origin
    finally:
        writer.close()


def test_the_collector_is_paused_during_the_walks_and_restored_as_found(tmp_path, monkeypatch):
    """Paused while the build is instrumented and registered, enabled again afterwards; a
    collector the user disabled stays disabled."""
    seen = []
    instrument, register = compiled.instrument, Session.register_executable

    def instrument_spy(*args, **kwargs):
        seen.append(("instrument", gc.isenabled()))
        return instrument(*args, **kwargs)

    def register_spy(self, info):
        seen.append(("register", gc.isenabled()))
        return register(self, info)

    monkeypatch.setattr(compiled, "instrument", instrument_spy)
    monkeypatch.setattr(Session, "register_executable", register_spy)
    tvmdbg.enable_dump_debug_info(str(tmp_path), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    assert gc.isenabled()
    _chain()
    assert seen == [("instrument", False), ("register", False)]
    assert gc.isenabled()
    gc.disable()
    try:
        _chain()
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert len(seen) == 4


def test_a_failing_registration_restores_the_collector(tmp_path, monkeypatch):
    """An exception out of the paused steps reaches the caller and leaves the collector on."""

    def fail(self, info):
        raise RuntimeError("registration failed")

    monkeypatch.setattr(Session, "register_executable", fail)
    tvmdbg.enable_dump_debug_info(str(tmp_path), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    with pytest.raises(RuntimeError, match="registration failed"):
        _chain()
    assert gc.isenabled()
