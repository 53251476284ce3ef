"""attribute's terminal tables: --group reads call series as compare does."""

from __future__ import annotations

import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.helpers import SWEEP, cli

KEYVALUE = re.compile(r"backend=(\S+) shape=(\S+) arm=\S+ iter=(\d+)")


def piped_names(tmp_path: Path) -> Path:
    """The shipped sweep with its calls named as README's --group pipe example: fa3|q8_ctx8k…|3."""
    path = tmp_path / "pipe.sqlite"
    shutil.copyfile(SWEEP, path)
    with sqlite3.connect(path) as conn:
        for sid, value in conn.execute("SELECT id, value FROM StringIds").fetchall():
            if m := KEYVALUE.fullmatch(value):
                conn.execute("UPDATE StringIds SET value=? WHERE id=?", ("|".join(m.groups()), sid))
    conn.close()
    return path


def test_attribute_group_reads_series_as_compare_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = piped_names(tmp_path)
    rc, out, _ = cli(capsys, "attribute", path, "--group", "pipe", "--limit", "0")
    assert rc == 0
    rows = [line for line in out.splitlines() if "q8_ctx" in line]
    assert len(rows) == 20 and all(re.search(r"│\s+10 │", r) for r in rows), out  # 20 series of 10 calls
    assert "│ fa3 q8_ctx8k " in out  # backend and shape, as compare names them


def test_attribute_group_that_reads_nothing_is_refused_first(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = cli(capsys, "attribute", SWEEP, "--group", r"nothing(?P<backend>x)(?P<shape>y)")
    assert rc == 2 and out == "" and "read no range" in err
