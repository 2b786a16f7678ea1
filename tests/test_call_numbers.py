"""Call numbers (a generation loop's steps) are counted per VM and written with each call
(Execution.call_number, Execution.vm): two models with the same function names in one process
(speculative decoding's draft and target), two VMs on two threads, and a loop longer than the
circular buffer each name the step of the VM that made it. examples/generate_paged_kv.py's
decoder over TVM's paged KV cache, driven token by token."""

from __future__ import annotations

import threading

import llm_models
import numpy as np
import pytest
import tvm

import tvmdbg
from tvmdbg_tb import analysis
from tvmdbg_tb.cli import reports

pytestmark = pytest.mark.slow  # two decoders built once


@pytest.fixture(scope="module")
def example():
    return llm_models.paged_example()


@pytest.fixture(scope="module")
def draft_and_target(example):
    """A 1-layer draft and a 2-layer target: the same function names (embed, prefill, decode)."""
    with llm_models.recording("FULL_HEALTH"):
        return example.build(example.Config(layers=1)), example.build(example.Config(layers=2))


def _first_origin(logdir) -> dict:
    page = analysis.alerts(llm_models.read_run(logdir))
    assert page["first_origin_index"] is not None, page["alerts"][:3]
    return page["alerts"][page["first_origin_index"]]


def _model(example, built, layers: int, plant: bool, max_tokens: int = 64):
    executable, names = built
    weights = example.weights(executable, names, example.Config(layers=layers), plant=plant)
    return example.Generator(executable, weights, max_tokens=max_tokens)


def test_speculative_decoding_names_the_targets_own_step(tmp_path, example, draft_and_target):
    """The draft proposes two tokens per round (embed + decode each), the target verifies them
    (one embed + decode of both); round 5 feeds the target the token whose embedding row is NaN
    in the target's weights only. The origin is the target's embed call 5 (the draft made 11 embed
    calls by then), the step the target's VM counted."""
    draft_built, target_built = draft_and_target
    logdir = tmp_path / "spec"
    tvmdbg.enable_dump_debug_info(str(logdir), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    try:
        draft = _model(example, draft_built, 1, plant=False)
        target = _model(example, target_built, 2, plant=True)
        token = draft.prefill(example.PROMPT[:2])
        for round_ in range(1, 6):
            proposed = [draft.decode(token) % 40 + 1 for _ in range(2)]  # never the planted token
            verified = [example.PLANTED_TOKEN, proposed[1]] if round_ == 5 else proposed
            target.embed(verified)
            token = proposed[-1]
    finally:
        tvmdbg.disable_dump_debug_info()
    origin = _first_origin(logdir)
    assert (origin["function_name"], origin["call"], origin["function_vms"]) == ("embed", 5, 2), origin
    run = llm_models.read_run(logdir)
    executions = run.execution_digests()
    embeds = executions[executions["function"] == run.function_names.index("embed")]
    assert len(embeds) == 16  # the draft's 11 embed calls and the target's 5: one name, two counts
    assert int(executions[executions["index"] == origin["execution_index"]]["vm"][0]) == origin["vm"]
    assert reports.call_text(origin) == f" (embed, call 5 of VM {origin['vm']})"


def test_two_vms_on_two_threads_count_their_own_calls(tmp_path, example, draft_and_target):
    """Two VMs of one executable, each on its own thread, 40 embed calls each; the second one's
    call 31 reads the NaN row: its own step, whatever the other thread did meanwhile."""
    executable, names = draft_and_target[0]
    logdir = tmp_path / "threads"
    tvmdbg.enable_dump_debug_info(str(logdir), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    try:
        weights = example.weights(executable, names, example.Config(layers=1), plant=True)
        vms = [tvm.relax.VirtualMachine(executable, tvm.cpu()) for _ in range(2)]
        barrier = threading.Barrier(2)

        def loop(k: int) -> None:
            barrier.wait()
            for step in range(1, 41):
                token = example.PLANTED_TOKEN if (k, step) == (1, 31) else step
                vms[k]["embed"](tvm.runtime.tensor(np.array([token], "int32")), weights)

        threads = [threading.Thread(target=loop, args=(k,)) for k in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        tvmdbg.disable_dump_debug_info()
    origin = _first_origin(logdir)
    assert (origin["function_name"], origin["call"], origin["function_calls"]) == ("embed", 31, 40), origin
    run = llm_models.read_run(logdir)
    numbers = run.execution_digests()[["vm", "call_number"]]
    for vm in set(numbers["vm"].tolist()):
        assert sorted(numbers["call_number"][numbers["vm"] == vm].tolist()) == list(range(1, 41))


def test_a_long_generation_keeps_the_origins_step_past_the_ring(tmp_path, example, draft_and_target):
    """600 decode steps under the default circular buffer (1000 calls; the loop makes 1,201):
    the NaN row read at step 550 is named as embed call 551 (prefill made the first), though the calls before it
    were dropped and nothing is left to count them from."""
    logdir = tmp_path / "long"
    tvmdbg.enable_dump_debug_info(str(logdir), tensor_debug_mode="FULL_HEALTH")  # the default ring
    try:
        model = _model(example, draft_and_target[0], 1, plant=True, max_tokens=640)
        token = model.prefill(example.PROMPT[:2])
        for step in range(1, 601):
            token = model.decode(example.PLANTED_TOKEN if step == 550 else token % 40 + 1)
    finally:
        tvmdbg.disable_dump_debug_info()
    run = llm_models.read_run(logdir)
    assert run.run_end.dropped_executions > 0
    origin = _first_origin(logdir)
    assert (origin["function_name"], origin["call"]) == ("embed", 551), origin  # prefill's embed is call 1
    done = llm_models.check(logdir)
    assert done.returncode == 1 and "(embed, call 551)" in done.stdout, done.stdout
