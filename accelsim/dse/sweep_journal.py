"""The sweep journal: the CSV table a sweep appends each finished point to, at once, so that an
interrupted sweep resumes where it stopped.

It holds up at the edges: a crash at any moment (a cut last line is set aside and its point
recomputed), a full disk (the partial line is taken back and the error says how many rows are
kept), a second sweep on the same file (an exclusive lock, released by the kernel when its holder
dies, whatever the way) and hand edits (every line ends with a CRC-32 of its own text; a line that
fails it, has the wrong number of columns, cannot be parsed or repeats a point is moved to
``<journal>.quarantine`` with a warning naming the file and the line, and its point is recomputed).
"""

from __future__ import annotations

import csv
import io
import os
import re
import socket
import time
import warnings
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from accelsim.errors import AccelsimError, InputError

try:
    import fcntl
except ImportError:  # not POSIX: an O_EXCL lock file whose holder's pid is checked instead
    fcntl = None

#: The last column of every journal line: CRC-32 (8 hex digits) of the line's text before it.
CRC_COLUMN = "row_crc"
_ID_RE = re.compile(r"[0-9a-f]{16}\Z")
_CRC_RE = re.compile(rb"[0-9a-f]{8}\Z")
#: Bad lines named one by one in the warning (the rest are counted).
_WARN_LINES = 5


class JournalError(InputError):
    """A sweep table that cannot be used as this sweep's journal (other columns, not a table)."""


class JournalLocked(JournalError):
    """Another live sweep is writing the same journal."""


class JournalIOError(AccelsimError, OSError):
    """The journal (or its quarantine) could not be written: ``errno`` is the system's, the
    message names the file, what is kept and how to go on."""

    def __str__(self) -> str:
        return str(self.strerror)


class JournalWarning(UserWarning):
    """Bad lines were found in a journal and moved to its quarantine file."""


# --------------------------------------------------------------------------- the lock
def _pid_alive(pid: int) -> bool:
    if os.name == "nt":  # os.kill(pid, 0) would terminate it there: assume the holder lives
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class JournalLock:
    """Exclusive lock on ``<journal>.lock`` for the whole life of one sweep.

    POSIX: ``flock`` on the lock file, which the kernel releases when its holder exits or dies
    (kill -9 included), so a stale lock cannot exist; the file names the holder (pid@host) for the
    error message and is removed on a clean release. Elsewhere: the lock file is created with
    ``O_EXCL`` and a leftover one whose holder (same host) is no longer running is taken over."""

    def __init__(self, journal: Path):
        self.journal = journal
        self.path = journal.with_name(journal.name + ".lock")
        self.fd = -1

    def _locked(self, holder: str) -> JournalLocked:
        who = f" (pid {holder})" if holder else ""
        return JournalLocked(
            f"{self.journal} is being written by another sweep{who}; wait for it to finish or "
            f"use another output (lock file {self.path})")

    def acquire(self) -> None:
        me = f"{os.getpid()}@{socket.gethostname()}\n".encode()
        for _ in range(20):
            fd = self._try_open()
            if fd is None:
                continue
            os.ftruncate(fd, 0)
            os.write(fd, me)
            self.fd = fd
            return
        raise JournalError(f"{self.path}: could not take the lock (the file keeps changing)")

    def _try_open(self) -> int | None:
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        if fcntl is not None:
            fd = os.open(self.path, flags, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
                os.close(fd)
                raise self._locked(holder) from None
            except BaseException:
                os.close(fd)
                raise
            # The previous holder removes the file on release: if that happened between our open
            # and our flock we hold a lock on a deleted file, and must start again.
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                return None
            return fd
        try:
            return os.open(self.path, flags | os.O_EXCL, 0o644)
        except FileExistsError:
            try:
                holder = self.path.read_text(errors="replace").strip()
            except FileNotFoundError:
                return None
            pid, _, host = holder.partition("@")
            if pid.isdigit() and host == socket.gethostname() and not _pid_alive(int(pid)):
                # stale: its holder is gone. (Two sweeps taking over the same stale lock at the
                # same instant can race here; the flock path above has no such window.)
                try:
                    os.unlink(self.path)
                except FileNotFoundError:
                    pass
                return None
            raise self._locked(holder) from None

    def release(self) -> None:
        if self.fd < 0:
            return
        try:
            os.unlink(self.path)  # while still holding it: a waiting opener then retries
        except OSError:
            pass
        os.close(self.fd)
        self.fd = -1


# --------------------------------------------------------------------------- lines
def cell_text(v: Any) -> str:
    """How a value is written in a journal cell (floats exactly, no line breaks)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        return float.__repr__(float(v))  # numpy floats too, without "np.float64(...)"
    text = str(v)
    if "\n" in text or "\r" in text:  # one line per row keeps a cut line a cut line
        text = " ".join(text.splitlines())
    return text


def _csv_line(cells: Sequence[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(cells)
    return buf.getvalue()


def encode_line(cells: Sequence[Any]) -> bytes:
    """One journal line: the cells as CSV, then the CRC-32 of everything before it, then LF."""
    head = (_csv_line([cell_text(c) for c in cells]) + ",").encode()
    return head + b"%08x\n" % zlib.crc32(head)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: Path, chunks: Iterable[bytes]) -> None:
    """Replace ``path`` with ``chunks`` all at once: a crash or a full disk leaves the old file."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("wb") as f:
            for c in chunks:
                f.write(c)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        if isinstance(exc, OSError) and exc.errno is not None:
            raise JournalIOError(exc.errno, f"{path}: cannot rewrite it ({exc.strerror}); it "
                                 "is unchanged") from None
        raise
    _fsync_dir(path)


# --------------------------------------------------------------------------- the journal
class Journal:
    """Append-only CSV journal of a sweep, locked for its writer.

    ``columns``: the table's columns (the journal adds :data:`CRC_COLUMN` after them).
    ``check_row(cells) -> reason | None`` judges a structurally sound line's meaning (status,
    parameters against their point_id); a reason sends the line to quarantine.
    Use as a context manager, or :meth:`open` then :meth:`close`."""

    def __init__(self, path: str | os.PathLike, columns: Sequence[str], *, id_column: str,
                 check_row: Callable[[Mapping[str, str]], str | None] | None = None):
        self.path = Path(path)
        self.columns = tuple(columns)
        self.header = (*self.columns, CRC_COLUMN)
        self._id = self.columns.index(id_column)
        self._check_row = check_row
        self.lock = JournalLock(self.path)
        self.quarantine_path = self.path.with_name(self.path.name + ".quarantine")
        #: point_id -> its line as written, in file order.
        self.lines: dict[str, bytes] = {}
        self.fd = -1
        self._size = 0
        self._failed = False

    # ------------------------------------------------------------------ open / close
    def __enter__(self) -> Journal:
        self.open()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def open(self) -> None:
        if self.path.is_dir():
            raise JournalError(f"{self.path} is a directory, not a sweep table")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.lock.acquire()
        try:
            self._load()
            self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0))
            self._size = os.fstat(self.fd).st_size
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.fd >= 0:
            try:
                if not self._failed:
                    os.fsync(self.fd)
            except OSError:
                pass
            os.close(self.fd)
            self.fd = -1
        self.lock.release()

    @property
    def done(self):
        """The point_ids already in the journal (a live view)."""
        return self.lines.keys()

    def fds(self) -> tuple[int, ...]:
        """Descriptors a forked worker process should close."""
        return tuple(fd for fd in (self.fd, self.lock.fd) if fd >= 0)

    # ------------------------------------------------------------------ reading
    def _load(self) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        head_line = _csv_line(self.header).encode()
        nl = data.find(b"\n")
        if nl < 0 and head_line.startswith(data.rstrip(b"\r")):
            # empty, or a crash while the header was being written
            write_atomic(self.path, [head_line + b"\n"])
            return
        first = data[:nl if nl >= 0 else len(data)].rstrip(b"\r")
        try:
            found = next(csv.reader([first.decode()], strict=True), [])
        except (UnicodeDecodeError, csv.Error):
            raise JournalError(f"{self.path}: line 1 is not a CSV header; this is not a sweep "
                               "table: use another output or delete the file") from None
        legacy = found == list(self.columns)  # written before lines carried a checksum
        if found != list(self.header) and not legacy:
            raise JournalError(
                f"{self.path}: existing sweep table has columns {found}, this sweep writes "
                f"{list(self.header)}; use another output or delete the file")
        body = data[nl + 1:] if nl >= 0 else b""
        raw_lines = body.split(b"\n")
        cut_tail = raw_lines.pop()  # b"" when the file ends with a newline
        bad: list[tuple[int, bytes, str]] = []
        where: dict[str, int] = {}
        dirty = legacy
        for lineno, raw in enumerate(raw_lines, start=2):
            if not raw.strip():
                dirty = True  # a blank line: nothing to keep, nothing to recompute
                continue
            reason, pid = self._judge(raw, legacy)
            if reason is None and pid in where:
                reason = f"repeats point {pid} of line {where[pid]}"
            if reason is not None:
                bad.append((lineno, raw, reason))
                continue
            where[pid] = lineno
            self.lines[pid] = raw.rstrip(b"\r") + b"\n" if not legacy else self._reencode(raw)
        if cut_tail:
            bad.append((len(raw_lines) + 2, cut_tail,
                        "cut short: no newline at the end of the file (the writer stopped "
                        "while writing it)"))
        if bad:
            self._quarantine(bad)
        if bad or dirty:
            write_atomic(self.path, [head_line + b"\n", *self.lines.values()])

    def _judge(self, raw: bytes, legacy: bool) -> tuple[str | None, str]:
        """(reason the line is bad or None, its point_id)."""
        line = raw.rstrip(b"\r")
        try:
            text = line.decode()
        except UnicodeDecodeError:
            return "not UTF-8 text", ""
        try:
            rows = list(csv.reader([text], strict=True))
        except csv.Error as exc:
            return f"not parsable as CSV ({exc})", ""
        fields = rows[0] if len(rows) == 1 else []
        want = len(self.columns) if legacy else len(self.header)
        if len(fields) != want:
            return f"{len(fields)} columns, expected {want}", ""
        if not legacy:
            head, _, crc = line.rpartition(b",")
            if not _CRC_RE.match(crc) or int(crc, 16) != zlib.crc32(head + b","):
                return "checksum does not match (the line was cut or changed)", ""
        pid = fields[self._id]
        if not _ID_RE.match(pid):
            return f"point_id {pid!r} is not 16 hex digits", ""
        if self._check_row is not None:
            reason = self._check_row(dict(zip(self.columns, fields)))
            if reason:
                return reason, pid
        return None, pid

    def _reencode(self, raw: bytes) -> bytes:
        fields = next(csv.reader([raw.rstrip(b"\r").decode()]))
        return encode_line(fields)

    def _quarantine(self, bad: list[tuple[int, bytes, str]]) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        try:
            with self.quarantine_path.open("ab") as f:
                for lineno, raw, reason in bad:
                    f.write(f"# {stamp} {self.path} line {lineno}: {reason}\n".encode())
                    f.write(raw.rstrip(b"\r") + b"\n")
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            raise JournalIOError(exc.errno, f"{self.quarantine_path}: cannot set {len(bad)} bad "
                                 f"line(s) of {self.path} aside ({exc.strerror}); the journal "
                                 "is unchanged") from None
        named = "; ".join(f"line {n}: {r}" for n, _, r in bad[:_WARN_LINES])
        more = f"; and {len(bad) - _WARN_LINES} more" if len(bad) > _WARN_LINES else ""
        warnings.warn(JournalWarning(
            f"{self.path}: {len(bad)} bad line(s) moved to {self.quarantine_path}, their points "
            f"will be recomputed: {named}{more}"), stacklevel=5)

    # ------------------------------------------------------------------ writing
    def append(self, cells: Sequence[Any]) -> None:
        """Write one finished point's line at once (one write of one whole line)."""
        line = encode_line(cells)
        pid = cell_text(cells[self._id])
        try:
            _write_all(self.fd, line)
        except OSError as exc:
            self._failed = True
            try:  # take back a partial line so the file stays whole
                os.ftruncate(self.fd, self._size)
            except OSError:
                pass
            raise JournalIOError(exc.errno, f"{self.path}: cannot append a row ({exc.strerror}); "
                                 f"the {len(self.lines)} rows already there are kept: free some "
                                 "space and rerun to resume") from None
        self._size += len(line)
        self.lines[pid] = line

    def finish(self, order: Mapping[str, int]) -> None:
        """Put the lines in sweep order (``order``: point_id -> rank); lines of points not in
        ``order`` (another sweep's, same columns) follow in their order. Atomic; skipped when the
        file is already in order."""
        ranked = sorted(self.lines, key=lambda pid: (0, order[pid]) if pid in order
                        else (1, 0))  # stable: the others keep their order
        if ranked == list(self.lines):
            return
        self.lines = {pid: self.lines[pid] for pid in ranked}
        head = (_csv_line(self.header) + "\n").encode()
        write_atomic(self.path, [head, *self.lines.values()])
        os.close(self.fd)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0))
        self._size = os.fstat(self.fd).st_size
