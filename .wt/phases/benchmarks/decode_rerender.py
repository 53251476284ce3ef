"""Re-render decode receipts (NAME.md) from their JSON with the current writer, after checking that the
summaries recomputed from the raw times equal the stored ones.

    python benchmarks/decode_rerender.py examples/decode/*.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from traceattr.jobs.decode import result_from_json, result_markdown


def main(paths: list[str]) -> None:
    for name in paths:
        path = Path(name)
        result = result_from_json(json.loads(path.read_text(encoding="utf-8")))
        path.with_suffix(".md").write_text(result_markdown(result), encoding="utf-8")
        print(f"{path.with_suffix('.md')}: re-rendered, summaries recomputed and equal to the stored ones")


if __name__ == "__main__":
    main(sys.argv[1:])
