"""Text that an encoding cannot carry: the terminal's fallbacks and the bytes of non-UTF-8 file names.

Two codec error handlers, registered on import:

``traceattr-terminal`` (stdout and stderr of the program): a terminal or pipe whose encoding is not UTF-8
(``PYTHONIOENCODING=latin-1``, ``ascii``, ``LC_ALL=C``) gets the ASCII spelling of the few symbols traceattr
prints (``≈`` as ``~``, ``…`` as ``...``, ``→`` as ``->``, ``×`` as ``x``, ``µ`` as ``u``), any other
character as ``\\uXXXX``, and a byte of a file name that is not UTF-8 (a lone surrogate, as Python decodes
such names) as ``\\xNN``, the way control characters are shown.

``traceattr-json`` (files traceattr writes): such a byte is written as the JSON escape ``\\udcNN``, which a
JSON reader turns back into the same string, and :func:`os.fsencode` into the same name; in HTML or
Markdown it reads as that text. Every other character is UTF-8 as before.
"""

from __future__ import annotations

import codecs

TERMINAL_ERRORS = "traceattr-terminal"
FILE_ERRORS = "traceattr-json"

ASCII_SPELLING: dict[str, str] = {
    "≈": "~", "…": "...", "→": "->", "←": "<-", "×": "x", "µ": "u", "—": "-", "–": "-", "±": "+/-", "≤": "<=",
    "≥": ">=", "≠": "!=", "²": "^2", "³": "^3", "⁻": "^-", "·": ".", "‘": "'", "’": "'", "“": '"', "”": '"',
    "✓": "ok", "✗": "x", "•": "*", "│": "|", "─": "-", "█": "#", "▏": "|", "Δ": "d", "σ": "s", "√": "sqrt",
}  # fmt: skip


def _surrogate(char: str) -> bool:
    return 0xDC80 <= ord(char) <= 0xDCFF


def _terminal(err: UnicodeError) -> tuple[str, int]:
    if not isinstance(err, UnicodeEncodeError):
        raise err
    bad = err.object[err.start : err.end]
    text = "".join(
        f"\\x{ord(c) - 0xDC00:02x}" if _surrogate(c) else ASCII_SPELLING.get(c, f"\\u{ord(c):04x}") for c in bad
    )
    return text, err.end


def _file(err: UnicodeError) -> tuple[str, int]:
    if not isinstance(err, UnicodeEncodeError):
        raise err
    bad = err.object[err.start : err.end]
    return "".join(f"\\u{ord(c):04x}" for c in bad), err.end  # lone surrogates only reach here


codecs.register_error(TERMINAL_ERRORS, _terminal)
codecs.register_error(FILE_ERRORS, _file)


def file_bytes(text: str) -> bytes:
    """*text* as every file traceattr writes holds it: UTF-8, a non-UTF-8 file name's bytes as ``\\udcNN``."""
    return text.encode("utf-8", errors=FILE_ERRORS)


def table_text(text: str) -> str:
    """*text* fit for a table column (polars holds UTF-8 only): a non-UTF-8 file name's bytes as ``\\xNN``,
    as the terminal shows them. The manifest beside the table keeps the exact name (``\\udcNN`` in JSON)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
