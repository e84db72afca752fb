"""Outputs that appear whole or not at all, and interrupts that leave nothing half-written.

``pymc-dp fit`` writes several files (posterior, summary, plots) after a long sampling run. They
are written into a hidden staging directory beside their final place and moved into place only
when every one of them is complete (:class:`StagedOutputs`); an interrupt (Ctrl-C) before that
removes the staging directory, so no file that looks like the result of a finished fit is left
behind. :class:`InterruptGuard` turns SIGINT into a recorded flag plus a ``KeyboardInterrupt``,
because PyMC's ``pm.sample`` catches ``KeyboardInterrupt`` and returns the truncated trace as if
sampling had finished: the flag is how the caller learns that it did not.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

__all__ = [
    "InterruptGuard",
    "StagedOutputs",
    "existing_outputs",
    "write_temporary",
    "write_text_atomic",
]


def write_temporary(path: Path, text: str, *, shared: bool) -> str:
    """Write ``text`` to a new temporary file beside ``path``, fsync'd; return its name.

    The name is unique to this writer (``.{name}.XXXX.tmp``); ``shared`` gives the file the
    permissions the umask allows instead of ``mkstemp``'s owner-only ones. A failure removes
    the file and re-raises.
    """
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if shared:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(temporary, 0o666 & ~umask)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return temporary


def write_text_atomic(path: str | Path, text: str, *, shared: bool = True) -> Path:
    """Write ``text`` to ``path`` whole or not at all: a unique temporary file, fsync, rename.

    Each writer has its own temporary name (several processes may write beside one another),
    the data reach the disk before the rename, and the rename itself is made durable by an
    fsync of the directory. A failure (a full disk, a read-only directory) removes the
    temporary file, leaves an earlier ``path`` untouched and raises an ``OSError`` that names
    ``path``.

    Parameters
    ----------
    path
        The file to write.
    text
        Its whole content (UTF-8).
    shared
        Give the file the permissions the umask allows (``False``: owner only, as ``mkstemp``).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "ledger.json"
    >>> write_text_atomic(out, "{}").read_text()
    '{}'
    """
    path = Path(path)
    temporary = None
    try:
        temporary = write_temporary(path, text, shared=shared)
        os.replace(temporary, path)
        temporary = None
        _fsync_directory(path.parent)
    except OSError as err:
        if err.filename is not None and Path(err.filename) == path:
            raise
        raise OSError(err.errno, err.strerror or str(err), str(path)) from None
    finally:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
    return path


def _fsync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable (where the platform allows opening directories)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def existing_outputs(out_dir: str | Path, names: Iterable[str]) -> list[Path]:
    """The files or directories among ``out_dir / name`` that exist already.

    Examples
    --------
    >>> import tempfile
    >>> existing_outputs(tempfile.mkdtemp(), ["posterior.nc", "summary.csv"])
    []
    """
    out_dir = Path(out_dir)
    return [out_dir / name for name in names if os.path.lexists(out_dir / name)]


class StagedOutputs:
    """A set of output files written in a staging directory and moved into place together.

    Parameters
    ----------
    out_dir
        Directory the outputs belong in; it must exist.
    names
        File (or directory) names of the outputs, e.g. ``["posterior.nc", "summary.csv"]``.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> out = pathlib.Path(tempfile.mkdtemp())
    >>> with StagedOutputs(out, ["a.txt"]) as staged:
    ...     _ = staged.path("a.txt").write_text("done")
    ...     _ = staged.commit()
    >>> sorted(p.name for p in out.iterdir()), (out / "a.txt").read_text()
    (['a.txt'], 'done')
    >>> with StagedOutputs(out, ["b.txt"]) as staged:   # never committed: nothing appears
    ...     _ = staged.path("b.txt").write_text("half")
    >>> sorted(p.name for p in out.iterdir())
    ['a.txt']
    """

    def __init__(self, out_dir: str | Path, names: Iterable[str]):
        self.out_dir = Path(out_dir)
        self.names = list(names)
        self.staging = Path(tempfile.mkdtemp(dir=self.out_dir, prefix=".pymc-dp-partial-"))
        self.committed = False

    def path(self, name: str) -> Path:
        """Where to write output ``name`` before :meth:`commit`."""
        if name not in self.names:
            raise ValueError(f"name must be one of {self.names} (got {name!r})")
        return self.staging / name

    @property
    def directory(self) -> Path:
        """The staging directory (for writers that take a directory)."""
        return self.staging

    def commit(self) -> list[Path]:
        """Move every output into ``out_dir``, replacing older ones; return the final paths.

        Each move is an atomic ``os.replace`` on one file system, so a reader never sees a
        partly written file. SIGINT is held back while the moves run (see :class:`InterruptGuard`)
        so that they are not cut between two files.
        """
        missing = [name for name in self.names if not os.path.lexists(self.staging / name)]
        if missing:
            raise FileNotFoundError(f"outputs {missing} were not written to {self.staging}")
        final = []
        with _sigint_deferred():
            for name in self.names:
                target = self.out_dir / name
                source = self.staging / name
                if source.is_dir() and os.path.lexists(target):
                    # os.replace cannot put a directory over a non-empty one: move the old aside.
                    old = self.staging / f".old-{name}"
                    os.replace(target, old)
                os.replace(source, target)
                final.append(target)
            self.committed = True
        return final

    def discard(self) -> None:
        """Remove the staging directory and whatever it holds."""
        shutil.rmtree(self.staging, ignore_errors=True)

    def __enter__(self) -> StagedOutputs:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.discard()


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Hold SIGINT back (blocked, delivered afterwards) while the body runs, in the main thread."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(
        signal, "pthread_sigmask"
    ):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class InterruptGuard:
    """Record SIGINT (Ctrl-C) while the body runs, and raise ``KeyboardInterrupt`` as usual.

    PyMC's ``pm.sample`` catches ``KeyboardInterrupt`` and returns the draws made so far;
    :attr:`interrupted` tells the caller that this happened. Outside the main thread (where no
    signal handler can be installed) the guard does nothing.

    Examples
    --------
    >>> with InterruptGuard() as guard:
    ...     pass
    >>> guard.interrupted
    False
    """

    def __init__(self) -> None:
        self.interrupted = False
        self._previous: Any = None
        self._installed = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.interrupted = True
        raise KeyboardInterrupt

    def __enter__(self) -> InterruptGuard:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is KeyboardInterrupt:
            self.interrupted = True
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
