"""traceattr.trace.validate: checks and repairs of what an export holds (long range names)."""

from __future__ import annotations

import polars as pl

from traceattr.trace.validate import MAX_RANGE_NAME_CHARS, shorten_long_names


def test_long_name_note_counts_nvtx_names_only() -> None:
    long = "k" * (MAX_RANGE_NAME_CHARS + 500)
    strings = pl.DataFrame({"id": [1, 2], "value": ["short", long]})
    text = pl.DataFrame({"row": [0], "text": ["range"]})
    # a long kernel name (id 2) that no NVTX row names: no note, the frames as they were
    same_strings, same_text, note = shorten_long_names(strings, text, pl.Series([1]))
    assert note is None and same_strings is strings and same_text is text
    # an NVTX range named by it: shortened, and the note says how long
    shortened, _, note = shorten_long_names(strings, text, pl.Series([1, 2]))
    assert note is not None and f"the longest: {len(long):,}" in note
    assert shortened["value"].str.len_chars().max() == MAX_RANGE_NAME_CHARS
