"""Names both ends of the control channel agree on, and how both read a request body (no
heavy imports: the plugin loads this)."""

from __future__ import annotations

import json

LIVE_FILE = "tvmdbg.live.json"  # in the run directory: {"host", "port", "token", "pid"}
TOKEN_HEADER = "X-Tvmdbg-Token"
MAX_BODY = 64 * 1024


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
