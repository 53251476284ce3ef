"""Writing results: single files and whole result sets, complete or absent.

A single file is written under a temporary name beside its target and
renamed when complete. A result set (``--out DIR``: tables plus a JSON
manifest) is written into a fresh temporary folder beside DIR and swapped in
with one rename, so DIR always holds one whole set: the previous one until the
new one is complete, never a mix (not after a full disk, a Ctrl-C, nor when
two runs write to the same DIR). A folder holding files traceattr did not
write is never replaced. Cleanup and the swap ignore a second Ctrl-C, so an
interrupt leaves no ``.partial`` behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import json
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, get_args

import polars as pl

from traceattr.core.errors import TraceattrError

FileFormat = Literal["csv", "json", "parquet"]
FILE_FORMATS: tuple[str, ...] = get_args(FileFormat)
PARTIAL = ".partial"  # suffix of everything written but not yet in place


class OutputError(TraceattrError):
    """An output cannot be written where it was asked for; names the path and why."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = Path(path)
        super().__init__(f"{self.path}: {problem}")


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold Ctrl-C while the body runs (cleanup, the final rename); raise it afterwards.

    Only the main thread receives signals; elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


@contextlib.contextmanager
def _translated(path: Path) -> Iterator[None]:
    """OS errors while writing *path* → one line naming it (full disk, read-only folder, …)."""
    try:
        yield
    except OutputError:
        raise
    except OSError as err:
        raise OutputError(path, f"cannot be written ({err.strerror or err})") from None


def _csv_ready(frame: pl.LazyFrame) -> pl.LazyFrame:
    # CSV has no enum/categorical type: write their labels
    return frame.with_columns(pl.col(pl.Enum, pl.Categorical).cast(pl.String))


@contextlib.contextmanager
def _atomic_file(target: Path) -> Iterator[Path]:
    """A temp path beside *target*, renamed onto it when the body completes, removed otherwise."""
    tmp: Path | None = None
    try:
        with _translated(target), interrupts_deferred():  # no Ctrl-C between creating it and owning it
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=PARTIAL, dir=target.parent)
            os.close(fd)
            tmp = Path(tmp_name)
        with _translated(target):
            yield tmp
            tmp.chmod(0o644)  # mkstemp makes it owner-only; results are meant to be shared
            with interrupts_deferred():
                tmp.replace(target)
    except BaseException:
        if tmp is not None:
            with interrupts_deferred():
                tmp.unlink(missing_ok=True)
        raise


def write_table(frame: pl.DataFrame | pl.LazyFrame, folder: Path, stem: str, fmt: FileFormat) -> Path:
    """Write *frame* to ``folder/stem.fmt``; lazy frames are streamed where the format allows."""
    if fmt not in FILE_FORMATS:
        raise ValueError(f"format must be one of {list(FILE_FORMATS)}, got {fmt!r}")
    target = folder / f"{stem}.{fmt}"
    with _atomic_file(target) as tmp:
        lazy = frame.lazy()
        if fmt == "parquet":
            # zstd at level 1: ~8% larger files than the default level 3, a fifth less CPU to write;
            # 64 k-row groups: the writer holds less at once (nested trace: peak 406 -> 360 MB), same CPU
            lazy.sink_parquet(tmp, compression="zstd", compression_level=1, row_group_size=65_536)
        elif fmt == "csv":
            _csv_ready(lazy).sink_csv(tmp)
        else:
            lazy.collect().write_json(tmp)
    return target


def write_text(path: Path, text: str) -> Path:
    """*text* to *path* atomically (a temp file beside it, renamed when complete); readable by all."""
    with _atomic_file(path) as tmp, tmp.open("w", encoding="utf-8", newline="\n") as out:
        out.write(text)
    return path


def write_manifest(folder: Path, name: str, content: Mapping[str, Any]) -> Path:
    """``folder/name`` as indented JSON (inputs, outputs, versions, notes)."""
    return write_text(folder / name, json.dumps(content, indent=2, default=str) + "\n")


# -- guarding what may be overwritten -----------------------------------------


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        return path.absolute()


def _inside(path: Path, folder: Path) -> bool:
    return _resolved(path).is_relative_to(_resolved(folder))


def check_file_target(target: Path, inputs: Sequence[Path], *, ours: Callable[[bytes], bool]) -> None:
    """Refuse to write *target* over an input, or over an existing file whose first 64 kB *ours* rejects."""
    for source in inputs:
        if _same_file(target, source) or _resolved(target) == _resolved(source):
            raise OutputError(target, "is an input of this command; not writing over it (choose another -o)")
    if target.is_dir():
        raise OutputError(target, "is a folder")
    if target.exists():
        try:
            with target.open("rb") as fh:
                head = fh.read(65536) if target.is_file() else b""
        except OSError as err:
            raise OutputError(target, f"exists and cannot be read ({err.strerror})") from None
        if not ours(head):
            raise OutputError(target, "exists and was not written by traceattr; not overwriting it")


def _manifest_outputs(folder: Path, manifest: str, command: str) -> set[str] | None:
    """The files a previous set of *command* in *folder* says it wrote, or None when it is no such set."""
    try:
        content = json.loads((folder / manifest).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(content, dict) or content.get("tool") != "traceattr" or content.get("command") != command:
        return None
    outputs = content.get("outputs")
    if not isinstance(outputs, list):
        return None
    return {str(o) for o in outputs} | {manifest}


def check_out_folder(folder: Path, *, command: str, manifest: str, inputs: Sequence[Path] = ()) -> None:
    """Refuse a result folder that is a file, holds an input, or holds files that are not a previous set."""
    folder = Path(os.path.abspath(folder))
    if folder.exists() and not folder.is_dir():
        raise OutputError(folder, "exists and is not a folder (--out takes a folder)")
    for source in inputs:
        if _inside(source, folder):
            raise OutputError(folder, f"holds the input {source}; write the results to another folder")
    if not folder.is_dir():
        return
    with _translated(folder):
        present = {p.name for p in folder.iterdir()}
    if not present:
        return
    ours = _manifest_outputs(folder, manifest, command)
    foreign = sorted(present - ours) if ours is not None else sorted(present)
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise OutputError(
            folder, f"holds files traceattr did not write ({shown}); give a new or empty folder for the results"
        )


# -- result sets ----------------------------------------------------------------


def _renameat2_exchange() -> Any:
    """``renameat2(..., RENAME_EXCHANGE)`` (Linux): swap two folders in one step; None elsewhere."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _swap_in(staging: Path, folder: Path) -> None:
    """Put the complete *staging* folder at *folder*; the set it replaces is removed afterwards."""
    try:
        staging.rename(folder)  # no set there yet (or an empty folder)
        return
    except OSError as err:
        if err.errno not in (errno.EEXIST, errno.ENOTEMPTY):
            raise
    exchange = _renameat2_exchange()
    if exchange is not None:
        if exchange(_AT_FDCWD, os.fsencode(staging), _AT_FDCWD, os.fsencode(folder), _RENAME_EXCHANGE) == 0:
            shutil.rmtree(staging, ignore_errors=True)  # now holds the previous set
            return
        if ctypes.get_errno() not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), str(folder))
    # no atomic exchange here: for an instant DIR is absent (never mixed)
    old = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old.", suffix=PARTIAL, dir=folder.parent))
    old.rmdir()
    folder.rename(old)
    staging.rename(folder)
    shutil.rmtree(old, ignore_errors=True)


class ResultSet:
    """Outputs of one command run, written together and put in place all at once.

    ``replace=True`` (``--out DIR``): the set is built in a temp folder beside
    *folder* and swapped for it. ``replace=False`` (a new run folder that
    already holds the raw capture): files are staged in a temp folder inside
    and moved in with the manifest last, so a run folder with its manifest is
    complete.
    """

    def __init__(
        self, folder: Path, *, command: str, manifest: str, inputs: Sequence[Path] = (), replace: bool = True
    ) -> None:
        self.folder = Path(os.path.abspath(folder))
        self.command = command
        self.manifest = manifest
        self.replace = replace
        self.files: list[str] = []
        if replace:
            check_out_folder(self.folder, command=command, manifest=manifest, inputs=inputs)
        self._staging: Path | None = None

    @property
    def staging(self) -> Path:
        if self._staging is None:
            raise RuntimeError("ResultSet is used as a context manager: `with ResultSet(...) as result:`")
        return self._staging

    def path(self, name: str) -> Path:
        """Where to write output *name* now (inside the staging folder)."""
        self.files.append(name)
        return self.staging / name

    def table(self, frame: pl.DataFrame | pl.LazyFrame, stem: str, fmt: FileFormat) -> Path:
        with _translated(self.folder / f"{stem}.{fmt}"):
            written = write_table(frame, self.staging, stem, fmt)
        self.files.append(written.name)
        return self.folder / written.name

    def text(self, name: str, text: str) -> Path:
        write_text(self.path(name), text)
        return self.folder / name

    def write_manifest(self, content: Mapping[str, Any]) -> Path:
        """The manifest, with ``tool``, ``command`` and ``outputs`` (what this set wrote) filled in."""
        body = {"tool": "traceattr", "command": self.command, **content}
        body["outputs"] = [*dict.fromkeys([*content.get("outputs", []), *self.files])]
        write_manifest(self.staging, self.manifest, body)
        return self.folder / self.manifest

    def commit(self) -> None:
        with _translated(self.folder), interrupts_deferred():
            if self.replace:
                _swap_in(self.staging, self.folder)
                return
            names = [n for n in dict.fromkeys(self.files) if n != self.manifest]
            for name in [*names, self.manifest]:  # manifest last: its presence means complete
                if (self.staging / name).exists():
                    (self.staging / name).replace(self.folder / name)
            shutil.rmtree(self.staging, ignore_errors=True)

    def discard(self) -> None:
        if self._staging is not None:
            with interrupts_deferred():
                shutil.rmtree(self._staging, ignore_errors=True)

    def __enter__(self) -> ResultSet:
        parent = self.folder.parent if self.replace else self.folder
        try:
            with _translated(self.folder), interrupts_deferred():  # no Ctrl-C between creating it and owning it
                parent.mkdir(parents=True, exist_ok=True)
                self._staging = Path(tempfile.mkdtemp(prefix=f".{self.folder.name}.", suffix=PARTIAL, dir=parent))
                self._staging.chmod(0o755)
        except BaseException:
            self.discard()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is None:
            try:
                self.commit()
            except BaseException:
                self.discard()
                raise
        else:
            self.discard()
