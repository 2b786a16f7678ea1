"""What a dump records and how: the options of tvmdbg.enable_dump_debug_info, in one place.

DumpOptions is the one declaration of every option: its name, default, type, check and
documentation. It is built once from the user's call (validated there), then passed whole
to the tracing switches, the session, the writer and live control; two calls with equal
DumpOptions (and the same logdir) are the same dump. The public function's signature and the
options part of its docstring are made from it (public_signature, public_doc), so the
keywords, their order and their defaults cannot drift apart from what is checked and used.

Live control's options are nested (LiveOptions): its public keywords are `live` and
`live_timeout`.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import os
import re
from collections.abc import Callable, Collection
from typing import Any

from tvmdbg_tb import storage
from tvmdbg_tb.events.modes import mode_name, mode_value

MAX_RUN_NAME = 200  # characters of a run name


class ParamSummaries(str, enum.Enum):
    """param_summaries: how tensor arguments are summarised (a str, so "every_call" == it)."""

    EVERY_CALL = "every_call"  # every tensor argument of every call
    ONCE_PER_VALUE = "once_per_value"  # once per tensor object while no write to it is seen
    # The weights (parameters past the function's num_input) as ONCE_PER_VALUE, the rest as EVERY_CALL.
    WEIGHTS_ONCE_PER_VALUE = "weights_once_per_value"


def checked_regex(name: str, pattern: Any) -> str | None:
    """A user's regular expression (None for none): a clear error naming the option for
    anything that is not a string that compiles."""
    if pattern is None:
        return None
    if not isinstance(pattern, str):
        raise TypeError(f"{name} must be a string, got {pattern!r}")
    try:
        re.compile(pattern)
    except re.error as error:
        raise ValueError(f"{name} {pattern!r} is not a valid regular expression: {error}") from error
    return pattern


def op_matches(pattern: re.Pattern, name: str, kernel: str, origins) -> bool:
    """Whether pattern is found (re.search) in an op's name, its kernel, or the type or var
    of a Relax op fused into it (origins: objects with op_type and var_name): what op_regex
    filters at record time and expected_nonfinite marks at read time."""
    names = [name, kernel, *(o.op_type for o in origins), *(o.var_name for o in origins)]
    return any(pattern.search(n) for n in names)


def _checked_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def _checked_int(name: str, value: Any, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int{' or None' if optional else ''}, got {value!r}")
    return value


def _checked_run_name(run_name: Any) -> str | None:
    """The user's run name, stripped (None for none); a clear error for anything else."""
    if run_name is None:
        return None
    if not isinstance(run_name, str):
        raise TypeError(f"run_name must be a string or None, got {run_name!r}")
    name = run_name.strip()
    if not name:
        raise ValueError("run_name must not be empty (leave it out for no name)")
    if len(name) > MAX_RUN_NAME:
        raise ValueError(f"run_name is {len(name)} characters long; at most {MAX_RUN_NAME}")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ValueError(f"run_name must be one line of printable text, got {run_name!r}")
    return name


def _dtypes(tensor_dtypes: Any) -> tuple[str, ...] | Callable[[str], bool] | None:
    """tensor_dtypes as sorted dtype names (or the callable as given)."""
    if tensor_dtypes is None or callable(tensor_dtypes):
        return tensor_dtypes
    if isinstance(tensor_dtypes, str):
        return (tensor_dtypes,)
    try:
        return tuple(sorted(str(getattr(d, "name", d)) for d in tensor_dtypes))
    except TypeError as error:
        raise TypeError(f"tensor_dtypes must be dtype names or a callable, got {tensor_dtypes!r}") from error


def _model_code(model_code: Any) -> tuple[str, ...] | None:
    """model_code as a tuple of entries (module names, files, directories); the entries are
    resolved to paths where they are used (tvmdbg_tb.capture.frames.parse_model_code)."""
    if model_code is None:
        return None
    entries = model_code.split(",") if isinstance(model_code, str) else list(model_code)
    if not all(isinstance(entry, str) for entry in entries):
        raise TypeError(f"model_code must be module names or paths, got {model_code!r}")
    return tuple(entry.strip() for entry in entries if entry.strip())


def _set(options: Any, name: str, value: Any) -> None:
    object.__setattr__(options, name, value)  # normalising a frozen dataclass in __post_init__


@dataclasses.dataclass(frozen=True, kw_only=True)
class LiveOptions:
    """Live control (public keywords `live`, `live_timeout`)."""

    enabled: bool = dataclasses.field(default=False, metadata={"keyword": "live"})
    timeout: float = dataclasses.field(default=60.0, metadata={"keyword": "live_timeout"})

    def __post_init__(self) -> None:
        _checked_bool("live", self.enabled)
        timeout = self.timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"live_timeout must be a positive number of seconds, got {timeout!r}")
        _set(self, "timeout", float(timeout))


@dataclasses.dataclass(frozen=True, kw_only=True)
class DumpOptions:
    """Everything enable_dump_debug_info takes besides logdir, validated and normalised once.

    tensor_debug_mode: NO_TENSOR, CURT_HEALTH, CONCISE_HEALTH, FULL_HEALTH, SHAPE,
        FULL_TENSOR or FULL_STATS (statistics for `tvmdbg compare`; layouts in
        protos/tvmdbg/debug_event.proto).
    circular_buffer_size: executions and traces kept (each); <= 0 keeps every record, and
        the dump then grows with the run unless circular_buffer_bytes bounds it.
    op_regex: only kernels whose op name, kernel symbol or original op type/var matches
        (re.search) are traced.
    tensor_dtypes: only outputs of these dtypes ("float32", ...) or for which the callable
        returns True are traced.
    trace_fused_ops: deep mode: every call of a fused kernel is re-run op by op on its
        inputs (tvmdbg_tb.replay), so a NaN/Inf made and masked inside the kernel is recorded
        at its own Relax op and line. Slow (kernels are traced by the VM instrument and each
        fused call runs twice); default False.
    live: let the TensorBoard tab control the program (watchpoints, pause, step, continue;
        see tvmdbg_tb/live). Kernels are then traced by the VM instrument, one by one.
    live_timeout: seconds a paused program waits without any dashboard contact before it
        resumes with a warning.
    param_summaries: "weights_once_per_value" (default) summarises a function's weights (the
        parameters past its num_input attribute: nn.Module export's packed params, a model
        imported with keep_params_as_input=True) as "once_per_value" does, every other argument
        on every call; "every_call" summarises every tensor argument of every call;
        "once_per_value" (health modes) summarises an argument tensor object once and repeats
        its counts while no write to it is seen (the rule and what it cannot see:
        tvmdbg_tb/tracing/param_cache.py; such summaries carry summarized_in_execution).
    run_name: a name for this run ("baseline", "lr=0.1 fp16"), kept in the dump's metadata
        and shown by the dashboard's run picker and the CLI next to the command line, so runs
        of one script can be told apart. One line, at most 200 characters. (The run's
        directory in the logdir has its own unique name: the writer's run_id.)
    circular_buffer_bytes: bytes kept in each of the two ring files (executions, traces); the
        oldest records go first. None (default): 256 MiB when circular_buffer_size > 0, no
        byte bound when it keeps everything; 0: no byte bound.
    model_code: which files count as the model's code, where the line shown for an op is
        (the innermost such frame of the stack that made it; docs/source-lines.md). Default
        (None): the user's own files and every installed package except TVM, PyTorch,
        NumPy and tvmdbg, so a transformers model's ops show their modeling_*.py lines, the
        user's call as `called_from`; else the environment variable TVMDBG_MODEL_CODE. Else
        module or package names, files or directories (a list or a comma-separated string):
        the user's own files plus those ("transformers.models", "torch.nn.modules"); "" or
        [] for the user's own files only.
    expected_nonfinite: a regular expression for ops whose non-finite outputs are intended
        (searched in op names, kernels, Relax op types and vars, e.g. "where|masked_fill"):
        their non-finite outputs, and those computed only from them, are listed apart as
        expected instead of alerts. Masks whose -inf the model absorbs need no pattern
        (docs/nonfinite.md).
    inner_op_check: in the health modes (and FULL_STATS), each fused kernel also counts the
        NaN and infinities its own Relax ops make inside it, so a value made and masked there
        (`where(mask, log(x), 0)`) raises an alert at that op's line (docs/inner_ops.md);
        default True. False builds the kernels without that check.

    Adding an option is a change here only: a field (its default; new ones go last, after
    inner_op_check, so that positional calls keep their meaning), its check and normalisation
    in __post_init__, and its line in this docstring (public_doc copies it into
    tvmdbg.enable_dump_debug_info's). The public signature takes the new keyword at once, and
    the option reaches every layer in the DumpOptions they are given; equality (a second
    enable with other options raises) covers it. A group of options that belongs to one tool
    is a nested frozen dataclass like LiveOptions, whose fields name their public keyword in
    metadata["keyword"]. tests/test_options.py pins the public keywords users rely on.
    """

    tensor_debug_mode: int | str = "NO_TENSOR"
    circular_buffer_size: int = 1000
    op_regex: str | None = None
    tensor_dtypes: Collection[str] | Callable[[str], bool] | None = None
    trace_fused_ops: bool = False
    live: LiveOptions = LiveOptions()
    param_summaries: ParamSummaries | str = ParamSummaries.WEIGHTS_ONCE_PER_VALUE
    run_name: str | None = None
    circular_buffer_bytes: int | None = None
    model_code: str | Collection[str] | None = None
    expected_nonfinite: str | None = None
    inner_op_check: bool = True

    def __post_init__(self) -> None:
        _set(self, "tensor_debug_mode", mode_value(self.tensor_debug_mode))
        _checked_int("circular_buffer_size", self.circular_buffer_size)
        ring_bytes = _checked_int("circular_buffer_bytes", self.circular_buffer_bytes, optional=True)
        if ring_bytes is not None and ring_bytes < 0:
            raise ValueError(f"circular_buffer_bytes must be >= 0 (0: no byte bound), got {self.circular_buffer_bytes}")
        checked_regex("op_regex", self.op_regex)
        _set(self, "expected_nonfinite", checked_regex("expected_nonfinite", self.expected_nonfinite) or None)
        _set(self, "tensor_dtypes", _dtypes(self.tensor_dtypes))
        _checked_bool("trace_fused_ops", self.trace_fused_ops)
        _checked_bool("inner_op_check", self.inner_op_check)
        if not isinstance(self.live, LiveOptions):
            raise TypeError(f"live must be LiveOptions, got {self.live!r}")
        try:
            _set(self, "param_summaries", ParamSummaries(self.param_summaries))
        except ValueError:
            choices = tuple(choice.value for choice in ParamSummaries)
            raise ValueError(f"param_summaries must be one of {choices}, got {self.param_summaries!r}") from None
        _set(self, "run_name", _checked_run_name(self.run_name))
        _set(self, "model_code", _model_code(self.model_code))

    @property
    def mode_name(self) -> str:
        return mode_name(self.tensor_debug_mode)

    def differences(self, other: DumpOptions) -> list[str]:
        """The public keywords whose values differ, as "name: mine -> other's"."""
        mine, theirs = public_values(self), public_values(other)
        return [f"{name}: {mine[name]!r} -> {theirs[name]!r}" for name in mine if mine[name] != theirs[name]]

    @classmethod
    def from_call(cls, *args: Any, **kwargs: Any) -> DumpOptions:
        """The options of a call of the public function (without its logdir), positional
        arguments in the public order; a TypeError like Python's for unknown keywords."""
        bound = public_signature().bind(None, *args, **kwargs)
        bound.apply_defaults()
        given = dict(bound.arguments)
        given.pop("logdir")
        return _build(cls, given)


def _keywords(cls: type) -> list[tuple[str, tuple[str, ...], dataclasses.Field]]:
    """(public keyword, path of field names, field) of every option of cls, nested ones in place."""
    found = []
    for field in dataclasses.fields(cls):
        if dataclasses.is_dataclass(field.default):
            for name, path, inner in _keywords(type(field.default)):
                found.append((inner.metadata.get("keyword", f"{field.name}_{name}"), (field.name, *path), inner))
        else:
            found.append((field.metadata.get("keyword", field.name), (field.name,), field))
    return found


def _build(cls: type, given: dict[str, Any]) -> Any:
    """An options dataclass from public keyword values (nested groups built on the way)."""
    values: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for keyword, path, _ in _keywords(cls):
        if keyword in given:
            if len(path) == 1:
                values[path[0]] = given[keyword]
            else:
                nested.setdefault(path[0], {})[path[-1]] = given[keyword]
    for name, inner in nested.items():
        group = next(f for f in dataclasses.fields(cls) if f.name == name)
        values[name] = type(group.default)(**inner)
    return cls(**values)


def public_values(options: DumpOptions) -> dict[str, Any]:
    """The options by public keyword (normalised values)."""
    values = {}
    for keyword, path, _ in _keywords(type(options)):
        value = options
        for name in path:
            value = getattr(value, name)
        values[keyword] = value
    return values


def public_signature() -> inspect.Signature:
    """enable_dump_debug_info's signature: logdir, then every option in field order."""
    parameters = [inspect.Parameter("logdir", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="str | os.PathLike")]
    for keyword, _, field in _keywords(DumpOptions):
        default = field.default
        if isinstance(default, enum.Enum):
            default = default.value
        parameters.append(
            inspect.Parameter(keyword, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=field.type)
        )
    return inspect.Signature(parameters, return_annotation="DebugEventsWriter")


def public_doc() -> str:
    """The options part of DumpOptions' docstring (what enable_dump_debug_info documents)."""
    doc = inspect.cleandoc(DumpOptions.__doc__ or "")
    body = doc.split("\n\n", 1)[1]
    return body.split("\n\nAdding an option", 1)[0]


def logdir_path(logdir: Any) -> str:
    """logdir as an absolute path, or a URL as given (tvmdbg_tb.storage); a clear error for
    anything else, and for a local path that is a mangled URL ("s3:/bucket": never created)."""
    if not isinstance(logdir, (str, os.PathLike)) or not os.fspath(logdir):
        raise ValueError(f"logdir must be a non-empty path, got {logdir!r}")
    return storage.check_location(logdir)
