"""A run holds its output folder while it trains: :class:`RunLock`, an exclusive ``flock`` on
``OUT_DIR/.lock``. The operating system drops the lock when the process dies (a crash or ``kill -9``),
so a stopped run never leaves a stale lock behind; the file itself records the holder's pid, for the
message that a second run on the same folder gets."""
from __future__ import annotations

import os
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no flock; the run's files are still never overwritten without --overwrite
    fcntl = None

LOCK_NAME = ".lock"


class RunFolderBusy(FileExistsError):
    """Another live process holds the folder's lock (a second trainer started on one ``--out-dir``)."""


class RunLock:
    """``with RunLock(folder):`` holds ``folder`` (created if missing) for this process, or raises
    :class:`RunFolderBusy` at once, naming the folder and the holder's pid. Leaving the block removes
    the lock file; a dead holder's file is taken over, as the kernel released its lock."""

    def __init__(self, folder: str | os.PathLike):
        self.path = Path(folder) / LOCK_NAME
        self.fd: int | None = None

    def __enter__(self) -> "RunLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while self.fd is None:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            if not self._lock(fd):
                holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                raise RunFolderBusy(f"{self.path.parent} is in use by another training run (pid {holder}, lock "
                                    f"{self.path}): wait for it to end, or choose another --out-dir")
            if self._same_file(fd):  # not a file the previous holder removed between our open and lock
                self.fd = fd
            else:
                os.close(fd)
        os.ftruncate(self.fd, 0)
        os.write(self.fd, str(os.getpid()).encode())
        return self

    def __exit__(self, *exc) -> None:
        self.path.unlink(missing_ok=True)  # while still holding the lock, so no one locks a removed file
        os.close(self.fd)
        self.fd = None

    @staticmethod
    def _lock(fd: int) -> bool:
        if fcntl is None:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _same_file(self, fd: int) -> bool:
        try:
            return os.stat(self.path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            return False
