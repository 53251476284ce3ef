"""Names from a trace, made fit to show: control characters escaped, C++ names shortened, docstrings as text.

Range and kernel names come from whatever program was traced: on a terminal they must never move the
cursor or split a line (:func:`printable`), and a templated kernel name is read by its head
(:func:`display_name`). The terminal tables and the HTML report both use these.
"""

from __future__ import annotations

import hashlib
import inspect
import re
import unicodedata

# Where a name too long for its line is broken: after one of these (``backend=`` | ``fa3``, ``Executor::`` |
# ``runFusion``, ``vectorized_`` | ``kernel<``), or at a space; never inside a part, which is what tells names apart.
SEPARATORS = frozenset("_:/|=;,<>()")
_AFTER_SEPARATOR = re.compile(f"(?<=[{re.escape(''.join(sorted(SEPARATORS)))} ])(?!:)")  # ``::`` stays whole


def name_parts(name: str) -> list[str]:
    """*name* split after each separator and space: the pieces a long name may be broken into (joined, *name*)."""
    return [p for p in _AFTER_SEPARATOR.split(name) if p]


def name_lines(name: str, width: int) -> list[str]:
    """*name* in lines of at most *width* characters, broken only after a separator or at a space; a part longer
    than *width* keeps a line of its own, whole (a label a little wider, never ``runFusio`` / ``n``)."""
    lines: list[str] = []
    line = ""
    for part in name_parts(name):
        if line and len(line.rstrip(" ")) + len(part.rstrip(" ")) > width:
            lines.append(line.rstrip(" "))
            line = part.lstrip(" ")
        else:
            line += part
    if line.strip() or not lines:
        lines.append(line.rstrip(" "))
    return lines


def shorten(name: str | None, width: int) -> str:
    """*name* made :func:`printable` and cut to *width* characters (an ellipsis marks the cut)."""
    if name is None:
        return ""
    name = printable(name[: width * 4])  # names come from the trace: never let them drive the terminal
    return name if len(name) <= width else name[: width - 1] + "…"


def plain_text(doc: str) -> str:
    """A docstring for the terminal: reST markup (``code``, roles, ``::``) taken out, the words kept."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", inspect.cleandoc(doc))  # :meth:`Shape.rank_share`
    text = re.sub(r"``([^`]+)``", r"\1", text)
    return re.sub(r"::$", ":", text, flags=re.MULTILINE)


def display_name(name: str | None) -> str:
    """A C++ kernel name without return type, template arguments and parameters.

    ``void flashinfer::mla::BatchMLAPagedAttentionKernel<KernelTraits<…>, …>(T2)``
    becomes ``flashinfer::mla::BatchMLAPagedAttentionKernel<…>``.
    """
    if not name:
        return ""
    name = name.replace("(anonymous namespace)", "{anonymous}")
    out, depth, paren = [], 0, 0
    for ch in name:
        if ch == "<":
            if depth == 0 and paren == 0:
                out.append("<…>")
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            if ch == "(":
                if paren == 0 and out and not "".join(out).rstrip().endswith("operator"):
                    paren += 1
                    continue
                paren += 1
            elif ch == ")":
                paren = max(0, paren - 1)
                continue
            if paren == 0:
                out.append(ch)
    text = "".join(out).strip()
    return text.removeprefix("void ").strip() or name


def distinct_display_names(names: list[str | None]) -> list[str]:
    """Display names, with a short hash where two full names shorten alike."""
    shorts = [display_name(n) for n in names]
    seen: dict[str, int] = {}
    for s in shorts:
        seen[s] = seen.get(s, 0) + 1
    return [
        f"{s} #{hashlib.sha1((n or '').encode()).hexdigest()[:6]}" if seen[s] > 1 else s
        for s, n in zip(shorts, names, strict=True)
    ]


_CONTROL = str.maketrans({c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)]})


# Unicode's format characters (Cf: the bidi overrides and isolates U+202A-202E, U+2066-2069, zero-width
# ones, U+FEFF), line and paragraph separators, and lone surrogates (a file name's non-UTF-8 bytes)
_INVISIBLE = frozenset({"Cf", "Zl", "Zp", "Cs"})
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if unicodedata.category(char) not in _INVISIBLE:
        return char
    code = ord(char)
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """*text* with control characters (newline, ESC, OSC, …) shown as ``\\xNN`` and format characters
    (a right-to-left override, a zero-width space) as ``\\uNNNN``: a name never moves the cursor, clears
    the screen, links, splits a line, nor turns the text after it around."""
    text = text.translate(_CONTROL)
    return text if text.isascii() else _NON_ASCII.sub(_escaped, text)
