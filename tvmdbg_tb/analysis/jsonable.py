"""JSON text exactly as the plugin's routes send it (TensorBoard's Cleanse: NaN -> "NaN")."""

from __future__ import annotations

import json

from tensorboard.backend import json_util


def dumps(obj, indent: int | None = None) -> str:
    return json.dumps(json_util.Cleanse(obj), indent=indent)


def num(x: float) -> float | None:
    """A float for JSON, None for NaN (an unmeasured time)."""
    x = float(x)
    return None if x != x else x
