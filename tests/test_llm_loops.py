"""TVM's own LLM path under tvmdbg: examples/generate_paged_kv.py's `nn.Module` decoder, exported
with packed params, run as a prefill and greedy decode steps over TVM's paged KV cache
(`TIRPagedKVCache`). Every VM call is recorded whatever its arguments (the cache is created
from ShapeTuples); a NaN is named where it entered the run, not where it came back out of
the KV cache; a planted weight is named by its parameter name."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import llm_models
import numpy as np
import pytest
import trace_paths
import tvm
from models import line_of

import tvmdbg
from tvmdbg_tb import analysis
from tvmdbg_tb.tracing import vm_wrapper

EXAMPLE = os.path.join(llm_models.ROOT, "examples", "generate_paged_kv.py")
STEPS = 8  # tokens generated: one prefill and STEPS - 1 decode steps
TVMDBG = [sys.executable, "-c", "import sys; from tvmdbg_tb.cli import main; sys.exit(main())"]


@pytest.fixture(scope="module")
def example():
    return llm_models.paged_example()


@pytest.fixture(scope="module")
def built(example):
    """The decoder compiled once, while tvmdbg records (its executable is instrumented)."""
    with llm_models.recording("FULL_HEALTH"):
        return example.build()


def _generate(example, built, logdir, plant=False, generator=None, mode="FULL_HEALTH", **options):
    """Runs the example's generation loop under tvmdbg; (tokens, the run, tvmdbg's warnings)."""
    executable, names = built
    options.setdefault("circular_buffer_size", -1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tvmdbg.enable_dump_debug_info(str(logdir), tensor_debug_mode=mode, **options)
        try:
            weights = example.weights(executable, names, plant=plant)
            tokens = (generator or example.Generator)(executable, weights).generate(example.PROMPT, STEPS)
        finally:
            tvmdbg.disable_dump_debug_info()
    reader = tvmdbg.DebugDataReader(str(logdir))
    reader.update()
    return tokens, reader.run(), [str(w.message) for w in caught if "tvmdbg" in str(w.message)]


def _check(logdir) -> subprocess.CompletedProcess:
    return subprocess.run([*TVMDBG, "check", str(logdir)], capture_output=True, text=True, timeout=300)


def _functions(run) -> list[str]:
    return [run.execution(i).function_name for i in range(len(run.execution_digests()))]


def _first_origin(run) -> dict:
    page = analysis.alerts(run)
    assert page["first_origin_index"] is not None, [(a["function_name"], a["op_name"]) for a in page["alerts"]]
    return page["alerts"][page["first_origin_index"]]


def test_every_call_is_recorded_the_cache_made_of_shape_tuples_too(example, built, tmp_path):
    """create_paged_kv_cache takes ShapeTuples: its call is in the dump like every other, with
    no warning, and the healthy run passes `check` with a complete dump."""
    tokens, run, warned = _generate(example, built, tmp_path)
    assert warned == [] and len(tokens) == STEPS
    functions = _functions(run)
    assert functions == ["create_paged_kv_cache"] + ["embed", "prefill"] + ["embed", "decode"] * (STEPS - 1)
    create = run.execution(0)
    assert [s.dtype for s in create.inputs] == ["Shape"] * 4 and [list(s.shape) for s in create.inputs] == [[1]] * 4
    assert run.completeness().complete
    done = _check(tmp_path)
    assert done.returncode == 0 and "all finite" in done.stdout, done.stdout + done.stderr


def test_a_nan_in_a_prompt_embedding_is_named_at_the_embed_call(example, built, tmp_path):
    """The NaN enters through the prompt's embed call (the weight row it reads), fills the
    prefill, is written into the KV cache and read back by every decode step: the origin is
    the first embed call's take, at the embed line, naming the parameter; no later call is
    an origin."""
    _, run, warned = _generate(example, built, tmp_path, plant=True)
    assert warned == []
    first = _first_origin(run)
    assert (first["function_name"], first["call"], first["kernel"]) == ("embed", 1, "take"), first
    assert first["location"]["file_path"] == EXAMPLE
    assert first["location"]["line"] == line_of(EXAMPLE, "self.embed_tokens(ids)")
    assert [p["name"] for p in first["bad_parameters"]] == ["embed_tokens.weight"], first
    page = analysis.alerts(run)
    assert page["origin_alerts"] == 1, [(a["function_name"], a["op_name"]) for a in page["alerts"] if a["origin"]]
    assert {a["function_name"] for a in page["alerts"]} >= {"embed", "prefill", "decode"}
    done = _check(tmp_path)
    assert done.returncode == 1, done.stdout
    assert "in execution 1 (embed, call 1)" in done.stdout and "embed_tokens.weight" in done.stdout, done.stdout
    assert f"{EXAMPLE}:{line_of(EXAMPLE, 'self.embed_tokens(ids)')}" in done.stdout


def test_a_planted_weight_is_the_origin_named_by_its_parameter_name(example, built, tmp_path):
    """An inf in layer 1's fused QKV weight: the prefill's layer-1 projection that reads it is
    the origin, named by the parameter's name (not packed_params[k]), at its line."""

    def planted(executable, names, plant=False):
        weights = example.weights(executable, names)
        k = names.index("layers.1.attn.qkv_proj.weight")
        value = weights[k].numpy()
        value[2, 3] = np.inf
        weights[k] = tvm.runtime.tensor(value)
        return weights

    executable, names = built
    tvmdbg.enable_dump_debug_info(str(tmp_path), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    try:
        example.Generator(executable, planted(executable, names)).generate(example.PROMPT, 3)
    finally:
        tvmdbg.disable_dump_debug_info()
    reader = tvmdbg.DebugDataReader(str(tmp_path))
    reader.update()
    first = _first_origin(reader.run())
    assert (first["function_name"], first["call"]) == ("prefill", 1), first
    assert [p["name"] for p in first["bad_parameters"]] == ["layers.1.attn.qkv_proj.weight"], first
    assert first["location"]["line"] == line_of(EXAMPLE, "self.qkv_proj(x)")
    run = reader.run()
    inputs = analysis.op_info(run, run.op(first["op_id"]))["inputs"]  # the graph's op view
    assert "layers.1.attn.qkv_proj.weight" in {i["name"] for i in inputs}
    done = _check(tmp_path)
    assert done.returncode == 1 and "layers.1.attn.qkv_proj.weight" in done.stdout, done.stdout
    assert "packed_params[" not in done.stdout


def test_a_nan_fed_into_decode_step_5_is_not_blamed_on_step_6(example, built, tmp_path):
    """A NaN handed to the fifth decode step as its input: that step's ops passed it on (the
    caller's data, no origin), it is written into the KV cache, and the sixth step, which reads
    it back from there, is no origin either: the first alert is decode call 5's."""

    class FeedsNaN(example.Generator):
        calls = 0

        def embed(self, tokens):
            x = super().embed(tokens)
            if len(tokens) == 1:
                self.calls += 1
                if self.calls == 5:
                    value = x.numpy()
                    value[0, 0, 3] = np.nan
                    x = tvm.runtime.tensor(value)
            return x

    _, run, _ = _generate(example, built, tmp_path, generator=FeedsNaN)
    page = analysis.alerts(run)
    alerts = page["alerts"]
    assert (alerts[0]["function_name"], alerts[0]["call"]) == ("decode", 5), alerts[0]
    assert not any(a["origin"] for a in alerts), [(a["function_name"], a["call"], a["op_name"]) for a in alerts]
    assert {a["call"] for a in alerts if a["function_name"] == "decode"} >= {5, 6}
    done = _check(tmp_path)
    assert done.returncode == 1 and "(decode, call 5)" in done.stdout, done.stdout


def test_a_call_that_cannot_be_recorded_makes_the_dump_incomplete(example, built, tmp_path, monkeypatch):
    """A call tvmdbg fails to record (here a summary made to raise on ShapeTuples) is never
    dropped with only a warning: the dump says which call it could not record, and `check`
    cannot call it complete (exit 2)."""
    from tvmdbg_tb.tracing import summary

    original = summary.tensor_summary

    def failing(mode, value):
        if type(value).__name__ == "Shape":
            raise RuntimeError("planted: cannot summarise a Shape")
        return original(mode, value)

    monkeypatch.setattr(summary, "tensor_summary", failing)
    for module in ("tvmdbg_tb.tracing.vm_tracer", "tvmdbg_tb.tracing.fast_tracer"):
        if hasattr(sys.modules[module], "tensor_summary"):
            monkeypatch.setattr(sys.modules[module], "tensor_summary", failing)
    _, run, warned = _generate(example, built, tmp_path)
    assert warned, "the failure is also said at once"
    completeness = run.completeness()
    assert not completeness.complete
    assert any(p.kind == "unrecorded" and "create_paged_kv_cache" in p.message for p in completeness.problems)
    done = _check(tmp_path)
    assert done.returncode == 2 and "could not record 1 call" in done.stdout + done.stderr, done.stdout + done.stderr


class _Swaps:
    """A generation loop whose decode steps change what the native path's learned plans
    assume: step 2 writes a row of zeros into one weight in place (the same object: the
    parameter cache's generation says its summary no longer holds), step 3 gets a new tensor
    object for another weight (its summary is made again), step 5 a NaN in its input (the
    replay's first non-finite call), step 6 an extra embed of five tokens (a symbolic shape the
    plans learned from one token do not hold)."""

    def __init__(self, generator):
        self.generator = generator
        self.steps = 0

    def run(self, example) -> tuple[list[int], tuple]:
        generator = self.generator
        embed = generator.embed

        def changed(tokens):
            x = embed(tokens)
            if len(tokens) == 1:
                self.steps += 1
                if self.steps == 3:
                    params = list(generator.params)
                    params[0] = tvm.runtime.tensor(params[0].numpy())
                    generator.params = tuple(params)
                if self.steps == 2:
                    weight = generator.params[1]
                    value = weight.numpy()
                    value[0] = 0
                    weight.copyfrom(value)
                if self.steps == 5:
                    value = x.numpy()
                    value[0, 0, 1] = np.nan
                    x = tvm.runtime.tensor(value)
                if self.steps == 6:
                    embed(tokens * 5)
            return x

        generator.embed = changed
        tokens = generator.generate(example.PROMPT, 3 * STEPS)
        native = vm_wrapper.tracer_of(generator.vm)._native
        return tokens, native.counts() if native else None


def _both_paths(example, built, tmp_path, mode) -> tuple[dict, tuple]:
    """The _Swaps generation traced by native_call and by the Python path, their records
    equal: (native_call's records, its counts)."""
    executable, names = built
    runs = {}
    for path in ("compiled", "python_call"):
        with trace_paths.using(path):
            tvmdbg.enable_dump_debug_info(str(tmp_path / path), tensor_debug_mode=mode, circular_buffer_size=-1)
            try:
                generator = example.Generator(executable, example.weights(executable, names))
                runs[path] = _Swaps(generator).run(example)
            finally:
                tvmdbg.disable_dump_debug_info()
    (native_tokens, counts), (python_tokens, python_counts) = runs["compiled"], runs["python_call"]
    assert native_tokens == python_tokens and python_counts is None
    native, python = trace_paths.records(tmp_path / "compiled"), trace_paths.records(tmp_path / "python_call")
    assert native.keys() == python.keys()
    for stream in native:
        assert native[stream] == python[stream], stream
    return native, counts


@pytest.mark.parametrize("mode", ["NO_TENSOR", "FULL_HEALTH"])
def test_native_and_python_call_paths_write_the_same_generation(example, built, tmp_path, mode):
    """The decode loop's calls (a KV cache in and out, packed weights summarised once per
    value, prompts of two lengths) are recorded by native_call from plans learned from a call
    the Python path recorded (call_plans.py): the same records as the Python path's, through a
    weight replaced mid-loop and a NaN fed into a step."""
    native, counts = _both_paths(example, built, tmp_path, mode)
    calls = 2 + 2 * 3 * STEPS  # the cache's creation, an embed and a prefill or decode per token, the extra embed
    assert len(native["execution"]) == calls
    # The calls a plan was learned from, or that no plan's guard passed (the new weight, the
    # NaN's replay), went to Python; the rest native_call recorded.
    assert counts[2] >= calls - 16, counts


def test_plans_relearned_between_a_calls_two_parts_leave_its_records_right(example, built, tmp_path, monkeypatch):
    """native_call ran call_rows with a learned plan, then hands the call to Python (the NaN
    step: its first non-finite row); meanwhile the function's plans were forgotten and learned
    again (what another thread's fifth plan does). Python is handed the very plan that ran,
    not whichever plan now holds its place, and the records are still the Python path's."""
    from tvmdbg_tb.tracing import call_plans, fast_tracer

    build, learn = call_plans._Builder.build, call_plans.PlanLearner.learn
    finish = fast_tracer.CompiledTracer._native_finish
    built_plans, taught, relearned, handed = [], [], [], []

    def building(self, inputs, outputs):
        made = build(self, inputs, outputs)
        if self.function.name == "decode" and made is not None:
            built_plans.append(made)
        return made

    def learning(self, call, *rest):
        if call.function.name == "decode":
            taught.append((call, *rest))
        return learn(self, call, *rest)

    def finishing(self, name, *args):
        rows, plan = args[-2:]
        if rows is not None and name == "decode":  # call_rows ran with a learned plan
            handed.append((plan, built_plans[-1]))  # the one that ran: the new weight's
            # The first weights' plan taught until the plans are forgotten and learned again.
            with monkeypatch.context() as patch:
                patch.setattr(call_plans._Builder, "build", lambda *_: built_plans[0])
                relearned.extend(learn(self._learner, *taught[-1]) for _ in range(call_plans.MAX_PLANS))
        return finish(self, name, *args)

    monkeypatch.setattr(call_plans._Builder, "build", building)
    monkeypatch.setattr(call_plans.PlanLearner, "learn", learning)
    monkeypatch.setattr(fast_tracer.CompiledTracer, "_native_finish", finishing)
    _both_paths(example, built, tmp_path, "FULL_HEALTH")
    assert relearned == [True] * call_plans.MAX_PLANS, "the NaN step's decode ran call_rows once, then plans reset"
    # decode's plans differ only in their Execution's weight summary, which call_rows' result
    # holds: the plan's identity is what would tell a mix-up here.
    [(plan, latest)] = handed
    assert plan is latest and plan is not built_plans[0]


@pytest.fixture(scope="module")
def scheduled(example):
    """The decoder compiled with the example's scheduled pipeline (FuseTransposeMatmul, the
    decode step's matmuls dlight GEMVs: parallel loops, vectorized partial sums), while
    tvmdbg records."""
    with llm_models.recording("FULL_HEALTH"):
        return example.build(schedule=True)


def test_a_rewriting_pass_inside_the_pipeline_keeps_the_users_lines(scheduled):
    """FuseTransposeMatmul as the pipeline's first pass (as MLC-LLM runs it) makes NT_matmul
    calls whose vars reuse the names of other ops (`lv4`, layer 1's attention call): each
    stands for the user's matmul it replaces, at its line (the projection's, the lm_head's),
    named by the pass, never at the attention call's line."""
    from tvmdbg_tb.capture import hooks

    info = hooks.info_of(scheduled[0])
    projection, attention = line_of(EXAMPLE, "self.qkv_proj(x)"), line_of(EXAMPLE, "attention_with_fused_qkv(")
    sites = [site for function in info.functions.values() for site in function.sites]
    for site in sites:
        if "NT_matmul" in site.kernel:
            assert all(o.frames[o.user_index][1] != attention for o in site.origins if o.user_index >= 0), site
    qkv = [site for site in sites if any("qkv_proj" in source.name for source in site.inputs)]
    assert sorted(site.kernel for site in qkv) == ["NT_matmul"] * 2 + ["NT_matmul4"] * 2, [s.kernel for s in sites]
    head = [site for site in sites if any("lm_head" in source.name for source in site.inputs)]
    at = {}
    for site in qkv + head:
        [origin] = site.origins  # the user's matmul, which the pass's op stands for
        assert origin.op_type == "relax.matmul", origin
        assert origin.rewritten_by.startswith("FuseTransposeMatmul: NT_matmul"), origin
        at.setdefault(origin.frames[origin.user_index][1], []).append(site.kernel)
    prefill_head = line_of(EXAMPLE, "return self.lm_head(self.norm(h))")
    decode_head = line_of(EXAMPLE, "return self.lm_head(self.norm(self._layers")
    assert at == {projection: at[projection], prefill_head: ["NT_matmul"], decode_head: ["NT_matmul"]}, at
    assert len(at[projection]) == 4  # prefill's and decode's, layers 0 and 1


def test_the_scheduled_build_is_traced_like_the_default_one(example, built, scheduled, tmp_path):
    """Healthy: the scheduled build generates the default build's tokens, every call recorded,
    and passes `check`. An inf written into layer 1's QKV weight after the prefill is first
    read by decode call 1's scheduled GEMV: the origin, named by the weight's name at the
    projection's line."""
    tokens, run, warned = _generate(example, scheduled, tmp_path / "healthy")
    assert warned == [] and tokens == _generate(example, built, tmp_path / "default")[0]
    assert _functions(run) == ["create_paged_kv_cache"] + ["embed", "prefill"] + ["embed", "decode"] * (STEPS - 1)
    done = _check(tmp_path / "healthy")
    assert done.returncode == 0 and "all finite" in done.stdout, done.stdout + done.stderr

    class PlantsAfterPrefill(example.Generator):
        def decode(self, token):
            k = names.index("layers.1.attn.qkv_proj.weight")
            value = self.params[k].numpy()
            if np.isfinite(value).all():  # the first decode step
                value[2, 3] = np.inf
                self.params = [*self.params[:k], tvm.runtime.tensor(value), *self.params[k + 1 :]]
            return super().decode(token)

    _, names = scheduled
    _, run, _ = _generate(example, scheduled, tmp_path / "planted", generator=PlantsAfterPrefill)
    first = _first_origin(run)
    assert (first["function_name"], first["call"]) == ("decode", 1), first
    assert "NT_matmul" in first["kernel"], first  # the GEMV FuseTransposeMatmul made, scheduled
    assert [p["name"] for p in first["bad_parameters"]] == ["layers.1.attn.qkv_proj.weight"], first
    assert first["location"]["line"] == line_of(EXAMPLE, "self.qkv_proj(x)")
