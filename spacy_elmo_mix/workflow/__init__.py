"""The project workflow: data conversion (``convert``), the grid runner (``grid``) and the comparison
of weighting schemes (``compare``).

This module holds the one helper all three share: :func:`atomic_output`, so that a file the workflow
writes is either complete or absent, never half-written (a killed run must not leave a truncated
``.spacy`` or ``metrics.json`` that a later resume would trust).
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator, Union


@contextlib.contextmanager
def atomic_output(path: Union[str, Path]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it to ``path`` when the block succeeds.

    path: the final file; its folder is created when missing. On an exception inside the block the
    temporary file is removed and ``path`` keeps whatever it held before.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(handle)
    tmp = Path(tmp_name)
    tmp.chmod(0o644)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text_atomic(path: Union[str, Path], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically and return the path.

    path: the file to write; text: its whole content.
    """
    with atomic_output(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)
