"""The package's one way to write a file: atomically (complete or absent, never half-written).

A leaf module (it imports nothing from the package), so every layer can use it: the biLM's file
writers, the layer cache's index, pretraining checkpoints and the workflow's outputs.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator, Union


@contextlib.contextmanager
def atomic_write(path: Union[str, Path], durable: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; when the block succeeds it is renamed to ``path``.

    path: the final file; its folder is created when missing. On any exception inside the block
    (a full disk included) the temporary file is removed and ``path`` keeps what it held before.
    durable: fsync the file before the rename and its folder after it, so that the new content
    survives a crash of the machine (used for indexes that other files are read through).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(handle)
    tmp = Path(tmp_name)
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o666 & ~umask)  # mkstemp makes 0600 files; give the usual permissions
    try:
        yield tmp
        if durable:
            _fsync(tmp, os.O_RDONLY)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    if durable:
        with contextlib.suppress(OSError):  # best effort: the new file is already in place
            _fsync(path.parent, os.O_RDONLY)


def write_text_atomic(path: Union[str, Path], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically and return the path.

    path: the file to write; text: its whole content.
    """
    with atomic_write(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_bytes_atomic(path: Union[str, Path], data: bytes, durable: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically and return the path (``durable`` as in :func:`atomic_write`)."""
    with atomic_write(path, durable=durable) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def _fsync(path: Path, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
