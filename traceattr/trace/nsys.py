"""Finding and running the Nsight Systems CLI (``nsys``).

Search order: ``$TRACEATTR_NSYS``, ``nsys`` on PATH, then the standard
install folders, including the copy that ships inside Nsight Compute
(``/opt/nvidia/nsight-compute/<ver>/host/target-linux-x64/nsys``). Commands
are argument lists, never shell strings.
"""

from __future__ import annotations

import glob
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from traceattr.core.errors import NsysError

ENV_VAR = "TRACEATTR_NSYS"
TRACE_SUFFIXES = (".nsys-rep", ".qdrep")  # nsys reports (.qdrep: before 2021.4), read through an export
ARROW_SUFFIX = ".arrow"  # ``--type arrowdir``: a folder of ``<table>.arrow`` IPC streams
_STANDARD_GLOBS = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-systems/*/target-linux-x64/nsys",
    "/usr/local/cuda*/bin/nsys",
    "/usr/local/cuda*/nsight-systems*/bin/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
    "/opt/nsys*/target-linux-x64/nsys",
    "/usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64/nsys",
)


def find_nsys() -> Path | None:
    """The nsys binary to use, or None when there is none."""
    env = os.environ.get(ENV_VAR)
    if env:
        path = Path(env)
        return path if path.is_file() and os.access(path, os.X_OK) else None
    on_path = shutil.which("nsys")
    if on_path:
        return Path(on_path)
    for pattern in _STANDARD_GLOBS:
        # newest version folder first
        for hit in sorted(glob.glob(pattern), reverse=True):
            if os.access(hit, os.X_OK):
                return Path(hit)
    return None


def run(argv: Sequence[str], *, what: str, timeout: float | None = None, cwd: str | Path | None = None) -> str:
    """Run *argv*; return stdout, or raise :class:`NsysError` with nsys's own last words."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False)
    except FileNotFoundError:
        raise NsysError(f"{what}: {argv[0]} cannot be executed") from None
    except subprocess.TimeoutExpired:
        raise NsysError(f"{what}: no answer after {timeout:.0f} s") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        reason = tail[-1] if tail else f"exit status {proc.returncode}"
        raise NsysError(f"{what} failed: {reason}")
    return proc.stdout


_NO_NSYS = (
    "is an nsys report and no nsys was found to export it; set {env}, or run "
    "`nsys export --type sqlite {report}` and pass the .sqlite"
)
_log = logging.getLogger("traceattr")

# tables every nsys SQLite export has, whatever its version (2022.2 → 2026.2)
_EXPORT_TABLES = ("StringIds", "TARGET_INFO_SESSION_START_TIME")


def _not_an_export(path: Path) -> str | None:
    """Why *path* is not an nsys SQLite export, or None when it is one."""
    import sqlite3

    try:
        with path.open("rb") as fh:
            if fh.read(16) != b"SQLite format 3\x00":
                return f"wrote no SQLite file ({path.name})"
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            con.close()
    except (OSError, sqlite3.Error) as err:
        return f"its output cannot be read as SQLite ({err})"
    missing = [t for t in _EXPORT_TABLES if t not in names]
    return f"its output lacks the tables of an nsys export ({', '.join(missing)})" if missing else None


def export_command(nsys: Path, report: Path, sqlite: Path) -> list[str]:
    return [str(nsys), "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(sqlite), str(report)]


def export_sqlite(report: Path, sqlite: Path | None = None) -> Path:
    """Export *report* (.nsys-rep) to SQLite beside it, or reuse an export newer than it.

    The raw report is only read, and no existing file is overwritten: an
    ``X.sqlite`` older than ``X.nsys-rep`` stays as it is and the export goes to
    ``X.<report time>.sqlite`` beside it (said in a :class:`~traceattr.core.errors.TraceNote` warning). nsys writes into a
    private temporary folder, so concurrent exports never share a half-written
    file; the finished file is linked into place only if that name is still free.
    When the report's folder is not writable the export goes to ``~/.cache/traceattr``.
    """
    from traceattr.core.errors import TraceError

    if not report.is_file():
        raise TraceError(report, "no such file")
    first = sqlite or report.with_suffix(".sqlite")
    candidates = _export_names(report, first)
    fresh = _reusable(candidates, report)
    if fresh is not None:
        return fresh
    if not os.access(first.parent, os.W_OK):
        cache = _cache_folder(report)
        candidates = [cache / c.name for c in candidates]
        fresh = _reusable(candidates, report)
        if fresh is not None:
            return fresh
    target = next((c for c in candidates if not c.exists() and not c.is_symlink() and not _leftovers(c)), None)
    if target is None:
        raise TraceError(report, f"{candidates[0]} and {candidates[1]} exist and are older than the report; "
                                 "move one away to export again")  # fmt: skip
    nsys = find_nsys()
    if nsys is None:
        raise TraceError(report, _NO_NSYS.format(env=ENV_VAR, report=report))
    from traceattr.core.output import PARTIAL, interrupts_deferred, partial_prefix, remove_stale_partials

    try:
        remove_stale_partials(target.parent, target.stem)
        private = Path(tempfile.mkdtemp(prefix=partial_prefix(target.stem), suffix=PARTIAL, dir=target.parent))
    except OSError as err:
        raise TraceError(report, f"cannot export into {target.parent} ({err.strerror})") from None
    try:
        tmp = private / target.name
        try:
            run(export_command(nsys, report, tmp), what=f"nsys export of {report}", timeout=3600)
        except NsysError as err:
            raise TraceError(report, str(err)) from None
        problem = _not_an_export(tmp)
        if problem:  # never publish it: a later run would reuse it as the report's export
            raise TraceError(report, f"nsys export exited 0 but {problem}")
        with interrupts_deferred():
            try:
                target = _publish(tmp, target, report)
            except OSError as err:
                raise TraceError(report, f"cannot put the export at {target} ({err.strerror or err})") from None
    finally:
        with interrupts_deferred():
            shutil.rmtree(private, ignore_errors=True)
    if target != first:
        from traceattr.core.errors import TraceNote

        left = _leftovers(first)
        why = (
            "is older than the report and was left as it is" if first.exists()
            else f"has {left[0].name} beside it (left by an earlier SQLite writer): a new export there would be "
                 "read with it" if left
            else "cannot be written there"
        )  # fmt: skip
        warnings.warn(TraceNote(f"{first} {why}; exported to {target}"), stacklevel=2)
    return target


def _export_names(report: Path, first: Path) -> list[Path]:
    """Where an SQLite export of *report* is looked for and written: *first*, then a name with the
    report's time, for when *first* is an older export left as it is."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(report.stat().st_mtime))
    return [first, first.with_name(f"{first.stem}.{stamp}.sqlite")]


def fresh_sqlite_export(report: Path) -> Path | None:
    """An SQLite export of *report* at least as new as it, where :func:`export_sqlite` would have put one
    (beside the report, or in the cache folder): read as it is, it costs no export."""
    try:
        candidates = _export_names(report, report.with_suffix(".sqlite"))
        cache = _cache_path()
    except (OSError, RuntimeError):  # the report is gone, or no home folder: nothing to reuse
        return None
    return _reusable([*candidates, *(cache / c.name for c in candidates)], report)


def arrow_export_command(nsys: Path, report: Path, folder: Path) -> list[str]:
    """``nsys export`` of the tables the loader reads into an Arrow folder (one IPC stream per table)."""
    from traceattr.trace.schema import LOADER_TABLES  # imports polars: only when a report is read

    tables = ",".join(f"^{t}$" for t in LOADER_TABLES)  # patterns: anchored, so a table's name alone matches
    return [str(nsys), "export", "--type", "arrowdir", "--tables", tables, "--force-overwrite", "true",
            "--quiet", "true", "--output", str(folder), str(report)]  # fmt: skip


@contextmanager
def arrow_export(report: Path) -> Iterator[Path | None]:
    """An Arrow export of *report* (only the loader's tables); None when this nsys cannot write one (before
    2023: no ``arrowdir`` or ``--tables``), so the caller exports SQLite.

    Kept in the export cache (:func:`export_cache`) and reused by every later command on the same report
    (its path, size and modification time unchanged): ``attribute``, then ``compare``, then ``report`` run
    nsys once. Made in a private folder of the cache and renamed into place, so a concurrent command sees
    a whole export or none. With the cache off (``TRACEATTR_EXPORT_CACHE=off``) or unusable the export is
    temporary, removed on exit. Never kept beside the report as the SQLite export is: it holds only the
    tables traceattr reads, and SQLite stays the interchange that other tools (``nsys stats``) read."""
    from traceattr.core.errors import TraceError

    entry = _cache_entry(report)
    if entry is not None and is_arrow_export(entry):
        _touch(entry)
        yield entry
        return
    nsys = find_nsys()
    if nsys is None:
        raise TraceError(report, _NO_NSYS.format(env=ENV_VAR, report=report))
    where = None if entry is None else entry.parent
    with tempfile.TemporaryDirectory(prefix=_CACHE_PARTIAL if where else "traceattr-arrow-", dir=where) as scratch:
        folder = Path(scratch) / report.stem
        try:
            run(arrow_export_command(nsys, report, folder), what=f"nsys export of {report}", timeout=3600)
        except NsysError as err:
            _log.info("%s; exporting SQLite instead", err)
            yield None
            return
        if not is_arrow_export(folder):
            yield None
            return
        if entry is not None:
            try:
                os.rename(folder, entry)  # atomic: the entry appears whole or not at all
                folder = entry
            except OSError:  # a concurrent command of the same report won: its export is this one
                folder = entry if is_arrow_export(entry) else folder
            _prune(entry.parent, keep=entry)
        yield folder


EXPORT_CACHE_ENV = "TRACEATTR_EXPORT_CACHE"  # off (no cache) | a folder (default: <user cache>/traceattr/exports)
EXPORT_CACHE_MB_ENV = "TRACEATTR_EXPORT_CACHE_MB"  # the cache's size bound, MB
EXPORT_CACHE_MB = 4096
_CACHE_PARTIAL = ".partial-"  # exports being written, and entries being evicted
_IN_USE_S = 600.0  # an entry used this recently is never evicted: another command may still be reading it
_STALE_PARTIAL_S = 6 * 3600.0  # a partial folder this old was left by a command that was killed


def export_cache() -> Path | None:
    """The folder Arrow exports of reports are kept in (``$TRACEATTR_EXPORT_CACHE``, else ``traceattr/exports``
    in ``$XDG_CACHE_HOME`` or ``~/.cache``); None when the cache is off or there is no home folder."""
    setting = os.environ.get(EXPORT_CACHE_ENV, "").strip()
    if setting.lower() in ("off", "0", "no", "false", "none"):
        return None
    try:
        return Path(setting).expanduser() if setting else _cache_path() / "exports"
    except RuntimeError:  # no home folder
        return None


def export_cache_bytes() -> int:
    """The cache's size bound (``$TRACEATTR_EXPORT_CACHE_MB``, default :data:`EXPORT_CACHE_MB`)."""
    setting = os.environ.get(EXPORT_CACHE_MB_ENV, "").strip()
    try:
        mb = float(setting) if setting else EXPORT_CACHE_MB
    except ValueError:
        from traceattr.core.errors import TraceattrError

        raise TraceattrError(f"{EXPORT_CACHE_MB_ENV}={setting!r}: expected a size in MB") from None
    return int(max(mb, 0) * 1e6)


def _cache_entry(report: Path) -> Path | None:
    """Where *report*'s Arrow export is kept: a name from its resolved path, size, modification time and the
    tables exported (a changed report, or a traceattr reading other tables, misses); None without a cache."""
    from traceattr.trace.schema import LOADER_TABLES

    cache = export_cache()
    if cache is None:
        return None
    try:
        st = report.stat()
        cache.mkdir(parents=True, exist_ok=True)
        if not os.access(cache, os.W_OK | os.X_OK):
            return None
    except OSError:
        return None
    key = f"{report.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\0{','.join(LOADER_TABLES)}"
    return cache / f"{report.stem[:48]}-{hashlib.sha256(key.encode()).hexdigest()[:20]}"


def _touch(entry: Path) -> None:
    """Mark *entry* used now: eviction goes by last use."""
    with suppress(OSError):
        os.utime(entry)


def _folder_bytes(folder: Path) -> int:
    try:
        return sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
    except OSError:
        return 0


def _prune(cache: Path, keep: Path) -> None:
    """Evict the least recently used exports until the cache fits its bound (:func:`export_cache_bytes`);
    *keep* (the one just made) and any used within :data:`_IN_USE_S` stay. An entry is renamed away first, so
    no command finds it half removed."""
    now = time.time()
    try:
        children = list(cache.iterdir())
    except OSError:
        return
    entries: list[tuple[float, int, Path]] = []
    for child in children:
        try:
            used = child.stat().st_mtime
        except OSError:
            continue
        if child.name.startswith(_CACHE_PARTIAL):
            if now - used > _STALE_PARTIAL_S:
                shutil.rmtree(child, ignore_errors=True)
        elif child.is_dir():
            entries.append((used, _folder_bytes(child), child))
    total, bound = sum(size for _, size, _ in entries), export_cache_bytes()
    for used, size, child in sorted(entries):
        if total <= bound:
            break
        if child == keep or now - used < _IN_USE_S:
            continue
        doomed = cache / f"{_CACHE_PARTIAL}evicted-{child.name}"
        try:
            os.rename(child, doomed)
        except OSError:
            continue  # another command evicted or is using it
        shutil.rmtree(doomed, ignore_errors=True)
        total -= size


def is_arrow_export(path: Path) -> bool:
    """*path* is a folder nsys wrote with ``--type arrowdir`` (it always holds the string table)."""
    return path.is_dir() and (path / f"StringIds{ARROW_SUFFIX}").is_file()


def _leftovers(export: Path) -> list[Path]:
    """A write-ahead log or rollback journal beside *export*'s name: SQLite applies one to whatever file
    bears the name, so a fresh export published there would be refused (or, checkpointed as that
    refusal advises, silently rewritten by another database's pages)."""
    sides = [export.with_name(export.name + suffix) for suffix in ("-wal", "-journal")]
    return [side for side in sides if side.exists() or side.is_symlink()]


def _reusable(candidates: Sequence[Path], report: Path) -> Path | None:
    """The first candidate export at least as new as *report*."""
    for c in candidates:
        try:
            if c.is_file() and c.stat().st_mtime >= report.stat().st_mtime:
                return c
        except OSError:
            continue
    return None


def _cache_path() -> Path:
    """Where exports of reports in read-only folders go (``Path.home`` raises RuntimeError without a home)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "traceattr"


def _cache_folder(report: Path) -> Path:
    from traceattr.core.errors import TraceError

    try:
        cache = _cache_path()
        cache.mkdir(parents=True, exist_ok=True)
    except (OSError, RuntimeError) as err:
        raise TraceError(
            report,
            f"its folder is not writable and no cache folder is usable ({err}); export it yourself with "
            f"`nsys export --type sqlite --output DIR/x.sqlite {report}` and pass the .sqlite",
        ) from None
    return cache


def _publish(tmp: Path, target: Path, report: Path) -> Path:
    """Put *tmp* at *target* unless a file appeared there meanwhile (then keep that one if it is fresh)."""
    try:
        os.link(tmp, target)  # fails if the name is taken: never replaces a file
        return target
    except FileExistsError:
        fresh = _reusable([target], report)
        if fresh is not None:  # a concurrent export of the same report won
            return fresh
        raise
    except OSError:  # no hard links on this file system
        if target.exists():
            raise
        tmp.replace(target)
        return target
