"""Writing results: single files and whole result sets, complete or absent.

A single file is written under a temporary name beside its target and
renamed when complete. A result set (``--out DIR``: tables plus a JSON
manifest) is written into a fresh temporary folder beside DIR and swapped in
with one rename, so DIR always holds one whole set: the previous one until the
new one is complete, never a mix (not after a full disk, a Ctrl-C, nor when
two runs write to the same DIR). A folder holding files traceattr did not
write is never replaced, nor a file a manifest lists that is not a table the
command writes. Cleanup and the swap hold every stop signal (Ctrl-C, SIGTERM,
SIGHUP), so a stopped run leaves no ``.partial`` behind; one killed outright
(SIGKILL, power loss) leaves its partials named with its process id, and the
next run writing there removes them once that process is gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import io
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Literal, get_args

import polars as pl

from traceattr.core import runfolder
from traceattr.core.encoding import file_bytes, table_text
from traceattr.core.errors import TraceattrError
from traceattr.core.stopping import deferred as interrupts_deferred

FileFormat = Literal["csv", "json", "parquet"]
FILE_FORMATS: tuple[str, ...] = get_args(FileFormat)
PARTIAL = ".partial"  # suffix of everything written but not yet in place
# What each command's result set (--out DIR) holds besides its manifest: <stem>.<format>. A manifest that
# lists any other name is not ours (a forged or edited one), so nothing it lists is replaced.
RESULT_STEMS: dict[str, frozenset[str]] = {
    "attribute": frozenset({runfolder.RANGES, runfolder.KERNELS, runfolder.TRACES, runfolder.ACROSS_TRACES}),
    "compare": frozenset({runfolder.CALLS, runfolder.SUMMARY, runfolder.CROSSOVERS, runfolder.FIT,
                          runfolder.TRACES, runfolder.ACROSS_TRACES, runfolder.PHASES}),
    "diff": frozenset({"diff", runfolder.PHASES}),
}  # fmt: skip


class OutputError(TraceattrError):
    """An output cannot be written where it was asked for; names the path and why."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


def partial_prefix(name: str) -> str:
    """How a temporary copy of output *name* starts: the process id in it tells a stale one from a live one.
    A name whose bytes are not UTF-8 is spelled with ``\\xNN`` here: polars takes only UTF-8 paths."""
    return f".{table_text(name)}.{os.getpid()}."


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # someone else's process: leave its files alone
    return True


def remove_stale_partials(folder: Path, name: str) -> None:
    """Remove ``.name.<pid>.*.partial`` files/folders in *folder* whose process is gone (a run killed outright).

    A partial of a live process (a run writing there at this moment) stays; so does anything not named so.
    """
    try:
        name = table_text(name)
        entries = list(folder.glob(f".{glob_escape(name)}.*{PARTIAL}"))
    except OSError:
        return
    for entry in entries:
        pid = entry.name[len(name) + 2 :].split(".", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or _alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()


def glob_escape(text: str) -> str:
    return "".join(f"[{c}]" if c in "*?[]" else c for c in text)


@contextlib.contextmanager
def _translated(path: Path) -> Iterator[None]:
    """OS errors while writing *path* → one line naming it (full disk, read-only folder, …)."""
    try:
        yield
    except OutputError:
        raise
    except OSError as err:
        raise OutputError(path, f"cannot be written ({err.strerror or err})") from None
    except pl.exceptions.PolarsError as err:  # polars' writers report a full disk as e.g. "Invalid thrift"
        reason = _disk_full(path) or (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise OutputError(path, f"cannot be written ({reason})") from None


def _disk_full(path: Path) -> str | None:
    folder = next((p for p in (path, *path.parents) if p.is_dir()), None)
    try:
        free = shutil.disk_usage(folder).free if folder is not None else None
    except OSError:
        return None
    return "no space left on the device" if free is not None and free < (1 << 20) else None


# A spreadsheet opening a CSV runs a cell that starts with one of these as a formula (=HYPERLINK(…),
# @SUM(…)); names come from the traced program, so such a cell is written with a leading ' (OWASP's rule),
# which the spreadsheet shows as text. TRACEATTR_CSV_RAW=1 writes the cells as they are.
FORMULA_START = r"^([=+\-@\t\r])"
CSV_RAW = "TRACEATTR_CSV_RAW"


def csv_safe(frame: pl.LazyFrame) -> pl.LazyFrame:
    """*frame* as a CSV file holds it: enum/categorical columns as their labels (CSV has no such type) and
    text cells that a spreadsheet would run as a formula quoted with a leading ``'``."""
    frame = frame.with_columns(pl.col(pl.Enum, pl.Categorical).cast(pl.String))
    if os.environ.get(CSV_RAW, "") not in ("", "0"):
        return frame
    return frame.with_columns(pl.col(pl.String).str.replace(FORMULA_START, "'$1"))


def csv_text(frame: pl.DataFrame) -> str:
    """*frame* as CSV text (for stdout), written as :func:`write_table` writes CSV files."""
    return csv_safe(frame.lazy()).collect().write_csv()


@contextlib.contextmanager
def _atomic_file(target: Path) -> Iterator[BinaryIO]:
    """A new file beside *target*, open for writing; renamed onto it when the body completes, removed
    otherwise.

    It is written through the descriptor that created it: reopened for writing, it would be truncated,
    and ext4 takes a truncated file for one being replaced and writes it back at its close (its
    replace-by-truncate safeguard: 45-80 ms for a 210 MB table on the benchmark VM, a new file needs none).
    """
    tmp: Path | None = None
    try:
        with _translated(target), interrupts_deferred():  # no Ctrl-C between creating it and owning it
            target.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_partials(target.parent, target.name)
            fd, tmp_name = tempfile.mkstemp(prefix=partial_prefix(target.name), suffix=PARTIAL, dir=target.parent)
            tmp = Path(tmp_name)
            file = os.fdopen(fd, "wb")
        with _translated(target):
            with file:
                yield file
            tmp.chmod(0o644)  # mkstemp makes it owner-only; results are meant to be shared
            with interrupts_deferred():
                _publish_file(tmp, target)
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
    with _atomic_file(target) as file:
        lazy = frame.lazy()
        if fmt == "json":
            _write_json(lazy.collect(), file)
            return target
        # the sinks write into a file we opened: a failed write (a full disk, a file-size limit) is an error
        # of ours, never lost; polars 1.28's sinks to a path reported some and dropped others, leaving a
        # truncated file behind a clean exit
        if fmt == "parquet":
            # zstd at level 1: ~8% larger files than the default level 3, a fifth less CPU to write;
            # 64 k-row groups: the writer holds less at once (nested trace: peak 406 -> 360 MB), same CPU
            lazy.sink_parquet(file, compression="zstd", compression_level=1, row_group_size=65_536)
        else:
            csv_safe(lazy).sink_csv(file)
    return target


_JSON_ROWS = 16_384  # rows serialised at a time: a slice of kernels is ~10 MB of text


def _write_json(frame: pl.DataFrame, out: BinaryIO) -> None:
    """``frame.write_json(out)``, a slice of rows at a time: the rows of the JSON array are written alike
    whatever slice they are in, so the bytes are the same, and the whole table's text (a GB for a million
    kernels) is never held at once."""
    out.write(b"[")
    for start in range(0, frame.height, _JSON_ROWS):
        text = io.BytesIO()
        frame.slice(start, _JSON_ROWS).write_json(text)
        if start:
            out.write(b",")
        out.write(text.getbuffer()[1:-1])  # the slice's rows without its brackets
    out.write(b"]")


def write_text(path: Path, text: str) -> Path:
    """*text* to *path* atomically (a temp file beside it, renamed when complete); readable by all."""
    return write_bytes(path, file_bytes(text))


def write_bytes(path: Path, data: bytes) -> Path:
    """*data* to *path* as :func:`write_text` writes text."""
    with _atomic_file(path) as file:
        file.write(data)
    return path


def write_manifest(folder: Path, name: str, content: Mapping[str, Any]) -> Path:
    """``folder/name`` as indented JSON (inputs, outputs, versions, notes)."""
    return write_text(folder / name, json.dumps(content, indent=2, default=str) + "\n")


# -- guarding what may be overwritten -----------------------------------------

# What a path was when a command checked it (None: absent), by absolute path: the check happens before
# the work and the rename that publishes the result after it, so the rename compares the two and refuses
# when the user put something there meanwhile (a file written, a folder made).
Snapshot = tuple[Any, ...] | None
_CHECKED_FILES: dict[str, tuple[Snapshot, Callable[[bytes], bool]]] = {}


def _file_snapshot(path: Path) -> Snapshot:
    try:
        st = path.lstat()
    except (FileNotFoundError, NotADirectoryError):  # absent (a file where a folder of its path should be too)
        return None
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns)


def _kept_name(target: Path) -> Path:
    """A free name beside *target* for a result that may not take its place (``notes.new.html``, ``D.new-2``)."""
    stem, suffix = (target.stem, target.suffix) if target.suffix and not target.is_dir() else (target.name, "")
    for n in range(1, 10_000):
        kept = target.with_name(f"{stem}.new{'' if n == 1 else f'-{n}'}{suffix}")
        if not os.path.lexists(kept):
            return kept
    raise OutputError(target, "no free name beside it to keep the new result")


def _changed(target: Path, kept: Path, what: str) -> OutputError:
    return OutputError(target, f"{what} while the result was being written; left as it is, the new result is in {kept}")


def _publish_file(tmp: Path, target: Path) -> None:
    """Rename the complete *tmp* onto *target*, unless *target* is no longer what :func:`check_file_target`
    saw: then, unless what is there now is again a file of ours (a concurrent run's), *tmp* is kept beside
    it (a name the error gives) and nothing of the user's is touched."""
    key = os.path.abspath(target)
    if key not in _CHECKED_FILES:
        tmp.replace(target)  # a file no check guards (a run folder's own files)
        return
    checked, ours = _CHECKED_FILES.pop(key)
    for again in (True, False):
        if _put_file(tmp, target, checked):
            return
        if again:  # what is there now: another run's result may be replaced as the check allowed
            checked = _file_snapshot(target)
            if checked is None or not (stat.S_ISREG(checked[2]) and ours(_head(target))):
                break
    kept = _kept_name(target)
    tmp.rename(kept)
    raise _changed(target, kept, "appeared" if checked is None else "changed")


def _head(path: Path) -> bytes:
    try:
        with path.open("rb") as fh:
            return fh.read(65536)
    except OSError:
        return b""


def _put_file(tmp: Path, target: Path, checked: Snapshot) -> bool:
    """*tmp* renamed onto *target* provided *target* is still *checked*, in one step where the system allows."""
    if checked is None:
        try:  # a hard link fails where a file appeared since the check (rename would replace it)
            os.link(tmp, target)
        except FileExistsError:
            return False
        except OSError:  # no hard links here (some network and FAT file systems): check, then rename
            if os.path.lexists(target):
                return False
            tmp.replace(target)
            return True
        tmp.unlink()
        return True
    if _exchange(tmp, target):  # the old file is now at tmp: is it the one checked?
        if _file_snapshot(tmp) == checked:
            tmp.unlink()
            return True
        _exchange(tmp, target)  # put the user's file back
        return False
    if _file_snapshot(target) == checked:
        tmp.replace(target)
        return True
    return False


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
    if target.exists() and not target.is_file():  # opening a FIFO waits for a writer; a device is no file
        raise OutputError(target, "is not a regular file (a FIFO, socket or device); give a file path")
    _CHECKED_FILES[os.path.abspath(target)] = (_file_snapshot(target), ours)
    if target.exists():
        try:
            with target.open("rb") as fh:
                head = fh.read(65536) if target.is_file() else b""
        except OSError as err:
            raise OutputError(target, f"exists and cannot be read ({err.strerror})") from None
        if not ours(head):
            raise OutputError(target, "exists and was not written by traceattr; not overwriting it")


def _manifest_outputs(folder: Path, manifest: str, command: str) -> set[str] | None:
    """The files a previous set of *command* in *folder* says it wrote, or None when it is no such set.

    Only names the command writes count (:data:`RESULT_STEMS`): a manifest listing anything else was not
    written by us, and nothing in the folder is replaced on its word.
    """
    try:
        content = json.loads((folder / manifest).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(content, dict) or content.get("tool") != "traceattr" or content.get("command") != command:
        return None
    outputs = content.get("outputs")
    if not isinstance(outputs, list) or not all(isinstance(o, str) for o in outputs):
        return None
    stems = RESULT_STEMS.get(command)
    if stems is not None and not all(_is_result_name(o, stems) for o in outputs if o != manifest):
        return None
    return {str(o) for o in outputs} | {manifest}


def _is_result_name(name: str, stems: frozenset[str]) -> bool:
    stem, dot, fmt = name.rpartition(".")
    return bool(dot) and stem in stems and fmt in FILE_FORMATS


def _folder_snapshot(folder: Path) -> Snapshot:
    """The folder and every entry in it (name, inode, size, time): what the swap must find unchanged."""
    head = _file_snapshot(folder)
    if head is None:
        return None
    try:
        entries = sorted((e.name, _file_snapshot(Path(e.path))) for e in os.scandir(folder))
    except OSError:
        return (*head, "unreadable")
    return (*head, tuple(entries))


def check_out_folder(folder: Path, *, command: str, manifest: str, inputs: Sequence[Path] = ()) -> Snapshot:
    """Refuse a result folder that is a file, holds an input, or holds files that are not a previous set;
    what it is now (the swap compares)."""
    folder = out_folder(folder)
    if folder.exists() and not folder.is_dir():
        raise OutputError(folder, "exists and is not a folder (--out takes a folder)")
    for source in inputs:
        if _inside(source, folder):
            raise OutputError(folder, f"holds the input {source}; write the results to another folder")
    if not folder.is_dir():
        return None
    snapshot = _folder_snapshot(folder)
    with _translated(folder):
        present = {p.name for p in folder.iterdir()}
    if not present:
        return snapshot
    ours = _manifest_outputs(folder, manifest, command)
    foreign = sorted(present - ours) if ours is not None else sorted(present)
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise OutputError(
            folder, f"holds files traceattr did not write ({shown}); give a new or empty folder for the results"
        )
    return snapshot


# -- result sets ----------------------------------------------------------------


def _renameat2_exchange() -> Any:
    """``renameat2(..., RENAME_EXCHANGE)`` (Linux): swap two folders in one step; None elsewhere."""
    try:
        # the running process's own symbols, libc's among them: find_library("c") would start ldconfig (~5 ms)
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap *a* and *b* in one step (``renameat2``, Linux); False where the system cannot."""
    exchange = _renameat2_exchange()
    if exchange is None:
        return False
    if exchange(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    if ctypes.get_errno() in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), str(b))


def _rename_new(src: Path, dst: Path) -> bool:
    """Rename *src* to *dst* only where nothing is at *dst* (``RENAME_NOREPLACE``); False when something is."""
    rename = _renameat2_exchange()
    if rename is not None:
        if rename(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE) == 0:
            return True
        if ctypes.get_errno() in (errno.EEXIST, errno.ENOTEMPTY):
            return False
        if ctypes.get_errno() not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), str(dst))
    if os.path.lexists(dst):
        return False
    src.rename(dst)
    return True


def _swap_in(staging: Path, folder: Path, checked: Snapshot, recheck: Callable[[], Snapshot]) -> None:
    """Put the complete *staging* folder at *folder*, provided *folder* is still what the check saw
    (*checked*) or, checked again (*recheck*), a set of ours (a concurrent run's); the set it replaces is
    removed afterwards. When it is neither (a folder made, a file written or changed in it meanwhile), the
    new set is kept beside it under a name the error gives and the folder is left as it is."""
    for again in (True, False):
        if _put_folder(staging, folder, checked):
            return
        if again:
            try:
                checked = recheck()
            except OutputError:
                break
    kept = _kept_name(folder)
    staging.rename(kept)
    raise _changed(folder, kept, "appeared" if checked is None else "changed")


def _put_folder(staging: Path, folder: Path, checked: Snapshot) -> bool:
    if checked is None:
        return _rename_new(staging, folder)
    if _exchange(staging, folder):  # the previous set is now at staging: is it the one checked?
        if _folder_snapshot(staging) == checked:
            shutil.rmtree(staging, ignore_errors=True)
            return True
        _exchange(staging, folder)  # the user's folder back in place
        return False
    if _folder_snapshot(folder) != checked:
        return False
    # no atomic exchange here: for an instant DIR is absent (never mixed)
    old = Path(tempfile.mkdtemp(prefix=partial_prefix(folder.name) + "old.", suffix=PARTIAL, dir=folder.parent))
    old.rmdir()
    folder.rename(old)
    staging.rename(folder)
    shutil.rmtree(old, ignore_errors=True)
    return True


def out_folder(folder: Path) -> Path:
    """The absolute folder results go to; a symlink to a folder stands for that folder (the swap renames folders)."""
    folder = Path(os.path.abspath(folder))
    return _resolved(folder) if folder.is_symlink() and folder.is_dir() else folder


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
        self.folder = out_folder(folder) if replace else Path(os.path.abspath(folder))
        self.command = command
        self.manifest = manifest
        self.replace = replace
        self.files: list[str] = []
        self._checked: Snapshot = None
        if replace:
            self._checked = check_out_folder(self.folder, command=command, manifest=manifest, inputs=inputs)
        self._staging: Path | None = None

    def _recheck(self) -> Snapshot:
        return check_out_folder(self.folder, command=self.command, manifest=self.manifest)

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
        final = self.folder / f"{stem}.{fmt}"
        try:
            with _translated(final):
                written = write_table(frame, self.staging, stem, fmt)
        except OutputError as err:  # name the output asked for, not the hidden staging folder
            raise OutputError(final, err.problem) from None
        self.files.append(written.name)
        return self.folder / written.name

    def text(self, name: str, text: str) -> Path:
        try:
            write_text(self.path(name), text)
        except OutputError as err:
            raise OutputError(self.folder / name, err.problem) from None
        return self.folder / name

    def write_manifest(self, content: Mapping[str, Any]) -> Path:
        """The manifest, with ``tool``, ``command`` and ``outputs`` (what this set wrote) filled in."""
        body = {"tool": "traceattr", "command": self.command, **content}
        body["outputs"] = [*dict.fromkeys([*content.get("outputs", []), *self.files])]
        try:
            write_manifest(self.staging, self.manifest, body)
        except OutputError as err:
            raise OutputError(self.folder / self.manifest, err.problem) from None
        return self.folder / self.manifest

    def commit(self) -> None:
        with _translated(self.folder), interrupts_deferred():
            if self.replace:
                _swap_in(self.staging, self.folder, self._checked, self._recheck)
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
                remove_stale_partials(parent, self.folder.name)
                self._staging = Path(
                    tempfile.mkdtemp(prefix=partial_prefix(self.folder.name), suffix=PARTIAL, dir=parent)
                )
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
