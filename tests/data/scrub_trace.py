"""Redact the environment and host paths from an nsys SQLite export in place,
so it can be committed as a fixture. Row counts and timings are unchanged.

    python3 tests/data/scrub_trace.py FILE.sqlite [--path PREFIX ...]

Environment blocks (NUL-separated NAME=value lists in StringIds), the values of
captured environment variables, and the system-environment table are replaced
by REDACTED. The current directory, $HOME and every --path PREFIX given are
replaced by '.' wherever they occur in text.
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3

ENV_TABLES = {"TARGET_INFO_SYSTEM_ENV"}


def scrub(path: str, prefixes: list[str]) -> int:
    rx = [re.compile(re.escape(p.rstrip("/"))) for p in sorted(set(prefixes), key=len, reverse=True) if p and p != "/"]
    c = sqlite3.connect(path)
    changed = 0
    tables = [r[0] for r in c.execute("select name from sqlite_master where type='table'")]
    for t in tables:
        cols = [r[1] for r in c.execute(f"pragma table_info('{t}')")]
        for col in cols:
            rows = c.execute(f'select rowid, "{col}" from "{t}" where typeof("{col}")=\'text\'').fetchall()
            for rowid, val in rows:
                new = val
                if "\x00" in val and "=" in val:  # a NUL-separated environment block
                    new = "REDACTED_ENVIRONMENT"
                elif t in ENV_TABLES and "=" in val and ";" in val:
                    new = "REDACTED"
                elif t == "META_DATA_CAPTURE" and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", val):
                    new = val.split("=", 1)[0] + "=REDACTED"
                for r in rx:
                    new = r.sub(".", new)
                if new != val:
                    c.execute(f'update "{t}" set "{col}"=? where rowid=?', (new, rowid))
                    changed += 1
    c.commit()
    c.execute("vacuum")
    c.close()
    return changed


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--path", action="append", default=[], help="a host path prefix to replace by '.'")
    a = ap.parse_args()
    prefixes = [os.getcwd(), os.path.expanduser("~"), *a.path]
    for f in a.files:
        print(f, scrub(f, prefixes), "values redacted")
