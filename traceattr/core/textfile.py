"""Small text inputs a user names (a rules file, a ctx distribution): read only when they are regular files.

Opening a FIFO for reading waits for a writer, for ever when none comes; a device reads without end. Both
are refused before any byte is read, in one line naming the file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def read_user_text(path: Path) -> str:
    """*path*'s text (UTF-8); ``OSError`` when it is not a regular file, ``UnicodeDecodeError`` when not UTF-8."""
    # O_NONBLOCK: opening a FIFO without a writer returns at once instead of waiting (regular files ignore it)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file (a FIFO, socket or device); give a file", str(path))
        return file.read().decode("utf-8")
