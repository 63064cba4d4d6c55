"""Opening and writing project files: never through a symbolic link, never a FIFO, never a torn
line. Every state file is rewritten by ``atomic_write`` (temp file + fsync + ``os.replace``) or
appended to by ``append_text`` / ``write_whole``; this module is the one place that does either.

A project folder may come from someone else (a tarball, a shared drive). If ``fetch.log`` or
``robots/`` in it were a symbolic link, a crawl would append server-controlled text to a file
outside the project (a shell rc file, say). So every state file and folder is opened here:

- ``O_NOFOLLOW`` on every open, and an ``lstat`` of every folder we create or write into: a
  symbolic link is refused with ``UnsafePath`` (an ``OSError`` whose message names the path),
  and nothing is written;
- only regular files: a FIFO in place of ``failed.txt`` would hang a reader forever
  (``O_NONBLOCK`` makes the open itself return, then the type is checked);
- ``check_tree`` refuses a project folder holding any link or special file before a command
  writes anything to it;
- ``write_whole`` never leaves a partial line behind: a short write (a full disk) is cut back to
  where it began, then reported.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import IO, Callable

_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
TMP_MODE = 0o644


class UnsafePath(OSError):
    """A project path that is a symbolic link or not a regular file: refused, nothing written."""

    def __init__(self, path: Path | str, why: str) -> None:
        super().__init__(errno.ELOOP, f"{why}; refusing to read or write through it "
                                      "(replace it with a plain file or folder)", str(path))

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "is a symbolic link"
    if stat.S_ISFIFO(mode):
        return "is a FIFO, not a regular file"
    if stat.S_ISSOCK(mode):
        return "is a socket, not a regular file"
    return "is not a regular file"


def open_fd(path: Path | str, flags: int, mode: int = TMP_MODE) -> int:
    """``os.open`` of a regular file that is not a symbolic link, else ``UnsafePath``."""
    try:
        fd = os.open(path, flags | _FLAGS, mode)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafePath(path, "is a symbolic link") from None
        if e.errno == errno.ENXIO:   # a FIFO opened for writing with no reader
            raise UnsafePath(path, "is a FIFO, not a regular file") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise UnsafePath(path, _kind(st.st_mode))
    os.set_blocking(fd, True)
    return fd


def open_append(path: Path | str) -> int:
    """A descriptor to append whole lines to ``path`` (created if missing)."""
    return open_fd(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)


def open_read(path: Path | str) -> int:
    return open_fd(path, os.O_RDONLY)


def reader(path: Path | str, mode: str = "rb", **kw: object):  # type: ignore[no-untyped-def]
    """``open(path, mode)`` for reading, through ``open_read`` (no link, no FIFO)."""
    return open(open_read(path), mode, closefd=True, **kw)  # type: ignore[call-overload]


def new_temp(path: Path) -> int:
    """Create ``path`` (a temp file of an atomic rewrite) fresh: a stale one, or a link planted
    under its name, is removed first (unlinking a link never touches its target)."""
    for _ in range(3):
        try:
            return open_fd(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
    return open_fd(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)


def write_whole(fd: int, data: bytes, path: Path | str) -> None:
    """Append ``data`` (whole lines) with one write call; a short write is cut back.

    The kernel writes all of it, or (disk full, quota) only a part: then the part is truncated
    away again, so the file never ends in half a line, and ``OSError(ENOSPC)`` is raised. The
    cut is skipped if another process appended after us meanwhile (its line must stay); the next
    start then moves the fragment to rejected.txt as it does for a power loss.
    """
    try:
        n = os.write(fd, data)
    except OSError as e:   # nothing was written (ENOSPC before the first byte)
        raise OSError(e.errno, e.strerror, str(path)) from None
    if n == len(data):
        return
    end = os.lseek(fd, 0, os.SEEK_CUR)
    try:
        if os.fstat(fd).st_size == end:
            os.ftruncate(fd, end - n)
    except OSError:
        pass
    raise OSError(errno.ENOSPC, f"short write ({n} of {len(data)} bytes; disk full?), cut back", str(path))


def atomic_write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``: temp file in the same folder, flush, fsync, os.replace."""
    atomic_write_with(path, lambda f: f.write(text.encode("utf-8")))


def atomic_write_with(path: Path, fill: Callable[[IO[bytes]], object]) -> None:
    """Replace ``path`` with what ``fill`` writes to a binary file, atomically (as ``atomic_write``).

    The temp file is created fresh with ``O_NOFOLLOW`` (``new_temp``), and ``os.replace``
    replaces a link at ``path`` rather than writing through it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(new_temp(tmp), "wb") as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    try:  # make the rename itself durable too
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def append_text(path: Path, text: str) -> None:
    """Append whole lines with a single write call, which a kill cannot tear."""
    fd = open_append(path)
    try:
        write_whole(fd, text.encode("utf-8"), path)
    finally:
        os.close(fd)


def ensure_dir(path: Path) -> Path:
    """``mkdir -p`` of a folder we will write into, refusing one that is a link or not a folder."""
    try:
        os.makedirs(path, 0o755)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePath(path, _kind(st.st_mode) if stat.S_ISLNK(st.st_mode) else "is not a folder")
    return path


def check_tree(folder: Path, depth: int = 2) -> None:
    """Refuse a project folder holding a symbolic link or a special file (FIFO, socket,
    device) in it or its sub-folders (``robots/``, ``warc/``): checked before a command writes.

    Every state file is also opened with ``O_NOFOLLOW``; this check makes the refusal come at
    once, as one error line, before the first byte is written anywhere."""
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return
    for entry in entries:
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            if depth > 1:
                check_tree(Path(entry.path), depth - 1)
        elif not stat.S_ISREG(st.st_mode):
            raise UnsafePath(entry.path, _kind(st.st_mode))
