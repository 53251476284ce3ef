"""--help reads in words: no Python types, -h, defaults shown, paragraphs; a wrong choice said plainly."""

from __future__ import annotations

import pytest

from tests.helpers import cli
from traceattr.cli import COMMANDS
from traceattr.cli.helpview import paragraphs


@pytest.mark.parametrize("name", ["", *COMMANDS])  # "": traceattr --help itself
def test_help_has_no_type_metavars(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = cli(capsys, *([name] if name else []), "-h")
    assert rc == 0 and "Usage: traceattr" in out
    for python in ("<bool>", "<list[", "<int", "<float", "<str>", "<path>", "2147483648", "Path]"):
        assert python not in out, (name, python)


def test_defaults_in_help_text_are_shown(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = cli(capsys, "round", "--help")
    assert "[default: 3]" in " ".join(out.split()), out


def test_a_wrong_choice_is_said_in_words(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = cli(capsys, "attribute", "x.sqlite", "-f", "xml")
    assert rc == 2 and "'xml' is not one of table, csv, json, parquet" in err and "Value error" not in err


def test_docstrings_become_paragraphs() -> None:
    text = "First line\n    goes on.\n\n    Second paragraph\n    here.\n\n    \b\n    kept\n    as is"
    assert paragraphs(text) == "First line goes on.\n\nSecond paragraph here.\n\n\b\nkept\nas is"
