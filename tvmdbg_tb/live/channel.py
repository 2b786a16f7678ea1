"""Names both ends of the control channel agree on, and how both read a request body (no
heavy imports: the plugin loads this)."""

from __future__ import annotations

import json
import time

LIVE_FILE = "tvmdbg.live.json"  # in the run directory: {"host", "port", "token", "pid"}
TOKEN_HEADER = "X-Tvmdbg-Token"
MAX_BODY = 64 * 1024
MAX_LIVE_FILE = 4096  # bytes: the program writes ~100
MAX_ANSWER = 16 << 20  # bytes of a program's answer the plugin reads (a full paused_call page is ~5 MB)
# A POST that changes the program carries its id and the time (clock()) after which the
# program must not apply it any more: the plugin has stopped waiting for its answer by then.
REQUEST_ID_HEADER = "X-Tvmdbg-Request-Id"
DEADLINE_HEADER = "X-Tvmdbg-Deadline"
# Both ends run on one machine (127.0.0.1): CLOCK_MONOTONIC is the same clock in every
# process there, and no wall-clock change moves it.
clock = time.monotonic


def apply_margin(timeout: float) -> float:
    """Seconds before the plugin stops waiting by which the program must have applied a
    request, so that its answer still arrives in time."""
    return min(1.0, timeout / 5)


def parse_deadline(text: str | None) -> float | None:
    """The deadline a request carries (None: none, or not a number)."""
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and value == value else None


class BodyError(ValueError):
    """A request body that is not a small JSON object; `status` is the HTTP status."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def parse_body(raw: bytes) -> dict:
    """A request body as a JSON object (empty: {}); BodyError says what is wrong with it."""
    if len(raw) > MAX_BODY:
        raise BodyError(f"request body larger than {MAX_BODY} bytes", status=413)
    try:
        body = json.loads(raw or b"{}")
    except RecursionError:
        raise BodyError("request body is nested too deeply") from None
    except ValueError as error:
        raise BodyError(f"request body is not JSON: {error}") from None
    if not isinstance(body, dict):
        raise BodyError(f"request body must be a JSON object, not {type(body).__name__}")
    return body
