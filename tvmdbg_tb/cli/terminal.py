"""What reaches the terminal: everything a dump says is shown as text, never obeyed.

A dump may come from someone else, and any of its strings (file paths, op and var names,
run names, notes, devices, watchpoint hits) may hold escape sequences that a terminal would
obey: retitle the window (OSC 0), write the clipboard (OSC 52), clear the screen (CSI 2J),
ring the bell, reorder text (bidi overrides). The CLI writes through TerminalStream, the one
place where its output becomes bytes: every control or format character is shown as an
escape (`\\x1b`, `\\u202e`), as the dashboard shows HTML as text.

tvmdbg's own colours (render.Style) are not escape sequences until then: Style marks its
codes with lone surrogates, which no protobuf string (valid UTF-8) nor file name (decoded
with surrogateescape to U+DC80..U+DCFF) can hold, and TerminalStream turns only those marks
into SGR colour codes. A newline or a tab in a string is kept: they move text, they do not
command the terminal.
"""

from __future__ import annotations

import re

_OPEN, _CLOSE = "\ud800", "\ud801"  # around a Style code: \ud800 "31" \ud801

# C0 and C1 controls but newline and tab, DEL, and the format characters terminals or the
# eye act on: soft hyphen, the bidi marks, embeddings, overrides and isolates (Trojan Source),
# zero-width characters, line and paragraph separators, interlinear annotations, tags; and
# any other lone surrogate (unencodable as UTF-8).
_HIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f"
    "\ufeff\ufff9-\ufffb\ud800-\udfff\U000e0000-\U000e007f]"
)
_MARKED = re.compile(f"{_OPEN}([0-9;]{{1,16}}){_CLOSE}")


def sgr(code: str) -> str:
    """Style's mark for the SGR code `code` ("31", "0"): a colour code only once written."""
    return f"{_OPEN}{code}{_CLOSE}"


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible(text: str) -> str:
    """text with every control and format character (and Style's marks) shown as an escape."""
    return _HIDDEN.sub(_escape, text)


def plain(text: str) -> str:
    """text without Style's marks (the width it takes on a terminal, once made visible)."""
    return visible(_MARKED.sub("", text))


def terminal_text(text: str) -> str:
    """What TerminalStream writes for text: data made visible, Style's marks made colours."""
    parts = _MARKED.split(text)  # data, code, data, code, ..., data
    parts[0::2] = map(visible, parts[0::2])
    parts[1::2] = (f"\033[{code}m" for code in parts[1::2])
    return "".join(parts)


class TerminalStream:
    """A text stream (stdout, stderr, a file) that writes terminal_text(text) for text."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        return self.stream.write(terminal_text(text))

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):  # flush, isatty, fileno, encoding, close, ...
        return getattr(self.stream, name)


def guarded(stream):
    """stream wrapped in a TerminalStream (once)."""
    return stream if isinstance(stream, TerminalStream) else TerminalStream(stream)
