"""A stored FULL_TENSOR value (pb.TensorValue) as a numpy array, whatever the dump says.

A dump may come from someone else: its dtype may be one numpy knows but no tensor has (object
pointers "O", empty records "V0", datetimes "M8", strings, structured or sub-array types), its
shape negative or beyond any memory, its content cut inside an element. Every reader of
stored values decodes them here, so each refuses those with the same message (BadValue)
instead of failing somewhere inside numpy.
"""

from __future__ import annotations

import math

import numpy as np

from tvmdbg_tb.proto import debug_event_pb2 as pb

TENSOR_KINDS = "biuf"  # bool, signed and unsigned integers, floats: what TVM tensors hold
_MAX_ELEMENTS = 1 << 62


class BadValue(ValueError):
    """A stored value no tensor can have (its dtype or shape); the message says which."""


def value_dtype(name: str) -> np.dtype:
    """The numpy dtype (little-endian: the schema's byte order) of a stored value's dtype."""
    shown = name[:40] + ("..." if len(name) > 40 else "")
    try:
        dtype = np.dtype(name) if len(name) <= 64 else None
    except (TypeError, ValueError, OverflowError, SyntaxError, MemoryError):
        dtype = None
    if dtype is None:
        raise BadValue(f"values of dtype {shown!r} cannot be shown (numpy has no such type)")
    if dtype.kind not in TENSOR_KINDS or dtype.fields is not None or dtype.subdtype is not None or not dtype.itemsize:
        raise BadValue(f"values of dtype {shown!r} cannot be shown (not a tensor's numeric type)")
    return dtype.newbyteorder("<")


def value_shape(value: pb.TensorValue) -> tuple[int, ...]:
    """The stored value's shape, checked: no negative dimension, at most 2**62 elements."""
    shape = tuple(int(d) for d in value.shape)
    if any(d < 0 for d in shape):
        raise BadValue(f"shape {list(shape)[:8]} has a negative dimension")
    if math.prod(shape) > _MAX_ELEMENTS:
        raise BadValue(f"shape {list(shape)[:8]} has more than 2**62 elements")
    return shape


def flat_values(value: pb.TensorValue) -> np.ndarray:
    """The whole elements the value's content holds, flat (no copy). Raises BadValue."""
    dtype = value_dtype(value.dtype)
    return np.frombuffer(value.content, dtype=dtype, count=len(value.content) // dtype.itemsize)


def stored_array(value: pb.TensorValue) -> tuple[np.ndarray, bool]:
    """(array, whole): the value in its shape when its content fills it, else the elements it
    holds, flat (a value the writer truncated, or a cut one). Raises BadValue."""
    flat = flat_values(value)
    shape = value_shape(value)
    if math.prod(shape) == flat.size:
        return flat.reshape(shape), True
    return flat, False
