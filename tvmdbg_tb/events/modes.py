"""The tensor debug modes as one table: what each records, asked for by property.

Code that behaves differently by mode asks the mode's ModeSpec (`spec(mode).comparable`,
`.counts`, `.summary`, ...) instead of testing the mode's number, so a new mode is a new row
here and its kernels, not a hunt through the package (tests/test_code_shape.py holds the
rest of the package to that).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tvmdbg_tb.proto import debug_event_pb2 as pb


class Summaries(enum.Enum):
    """What the summary kernels compiled into a build record of each kernel output (a build
    with none, None, is traced by the VM instrument)."""

    TIMESTAMPS = "timestamps"  # when each kernel ran, nothing of its output
    SHAPE = "shape"  # sizes and dims
    HEALTH = "health"  # element counts
    STATS = "stats"  # element counts and statistics of the finite elements

    @property
    def counts(self) -> bool:
        """The rows hold element counts (NaN, infinities, ...)."""
        return self is Summaries.HEALTH or self is Summaries.STATS


class Counts(enum.Enum):
    """How much of a tensor's element counts a mode's debug_values keep."""

    ANY = "any"  # one flag: some element is NaN or infinite
    NONFINITE = "nonfinite"  # size, -inf, +inf, NaN
    FULL = "full"  # device, dtype, rank, size, and every kind of element


_FULL_HEALTH = ("device_id", "dtype", "rank", "size", "neg_inf", "pos_inf", "nan", "negative", "zero", "positive")
STATS_FIELDS = ("min", "max", "mean", "l2_norm", "abs_max")  # of the finite elements, in float64


@dataclass(frozen=True)
class ModeSpec:
    """One tensor debug mode: its debug_values layout and what its records can answer."""

    value: int
    layout: tuple[str, ...]  # names of the fixed leading debug_values (SHAPE appends its dims)
    summary: Summaries | None  # what a compiled build's summary kernels record; None: the VM instrument's
    counts: Counts | None = None  # element counts in the debug_values
    statistics: bool = False  # min, max, mean, l2_norm, abs_max of the finite elements
    values: bool = False  # the tensors' values themselves (TensorValue)
    dims: bool = False  # dtype, rank, size and each dimension, nothing of the values
    shows: str = ""  # what the dashboard and the CLI show of a tensor in this mode

    @property
    def name(self) -> str:
        return pb.TensorDebugMode.Name(self.value)

    @property
    def knows_finite(self) -> bool:
        """Records say whether a tensor holds a NaN or an infinity (alerts, check, the origin)."""
        return self.counts is not None or self.values

    @property
    def health(self) -> bool:
        """One of the health modes proper: element counts and nothing more, so a summary
        can be cached per parameter value and computed by the counting kernels."""
        return self.counts is not None and not self.statistics

    @property
    def comparable(self) -> bool:
        """Two runs can be compared kernel by kernel (statistics or values to set side by side)."""
        return self.statistics or self.values

    @property
    def compiled(self) -> bool:
        """A build can record this mode with summary kernels compiled into it."""
        return self.summary is not None

    @property
    def tensor_data(self) -> bool:
        """Records hold something of each tensor beyond its dtype and shape: a summary or its
        values (all but NO_TENSOR, whose records only say which kernels ran and when)."""
        return self.summarised or self.values

    @property
    def summarised(self) -> bool:
        """Each tensor's record carries debug_values."""
        return bool(self.layout)


TABLE: tuple[ModeSpec, ...] = (
    ModeSpec(pb.NO_TENSOR, (), Summaries.TIMESTAMPS, shows="which kernels ran and when, no tensor data"),
    ModeSpec(pb.CURT_HEALTH, ("has_inf_or_nan",), Summaries.HEALTH, Counts.ANY, shows="whether any NaN/Inf"),
    ModeSpec(
        pb.CONCISE_HEALTH,
        ("size", "neg_inf", "pos_inf", "nan"),
        Summaries.HEALTH,
        Counts.NONFINITE,
        shows="size and NaN, -Inf, +Inf counts",
    ),
    ModeSpec(pb.FULL_HEALTH, _FULL_HEALTH, Summaries.HEALTH, Counts.FULL, shows="dtype, shape and every count"),
    ModeSpec(pb.SHAPE, ("dtype", "rank", "size"), Summaries.SHAPE, dims=True, shows="dtype and shape"),
    ModeSpec(pb.FULL_TENSOR, (), None, values=True, shows="the values themselves"),
    ModeSpec(
        pb.FULL_STATS,
        _FULL_HEALTH + STATS_FIELDS,
        Summaries.STATS,
        Counts.FULL,
        statistics=True,
        shows="every count, and min, max, mean, L2 norm of the finite values",
    ),
)
MODES: dict[int, ModeSpec] = {m.value: m for m in TABLE}
MODE_NAMES: tuple[str, ...] = tuple(m.name for m in TABLE)
# The spec of a mode outside the table (UNSPECIFIED, or a number from a newer writer): it
# claims nothing, so nothing is read from its records.
UNKNOWN = ModeSpec(pb.TENSOR_DEBUG_MODE_UNSPECIFIED, (), None)


def spec(mode: int) -> ModeSpec:
    """The table's row of a TensorDebugMode value; UNKNOWN for any other number."""
    return MODES.get(mode, UNKNOWN)


def mode_value(mode: str | int) -> int:
    """The TensorDebugMode enum value of a mode given by name (any case) or value."""
    if isinstance(mode, int) and not isinstance(mode, bool):
        if mode in MODES:
            return mode
    elif isinstance(mode, str) and mode.upper() in MODE_NAMES:
        return pb.TensorDebugMode.Value(mode.upper())
    raise ValueError(f"unknown tensor_debug_mode {mode!r}; expected one of {', '.join(MODE_NAMES)}")


def mode_name(mode: int) -> str:
    return spec(mode).name
