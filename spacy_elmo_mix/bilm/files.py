"""File helpers: resolving paths or URLs, and atomic writes."""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator, Union

from ..errors import ElmoFileError

URL_SCHEMES = ("http://", "https://", "s3://", "gs://", "hf://")


def resolve_path(path_or_url: Union[str, Path], what: str = "ELMo file") -> Path:
    """A local path for ``path_or_url``; URLs are downloaded once into cached-path's cache.

    Offline or unreachable URLs raise :class:`ElmoFileError` naming the URL.
    """
    text = str(path_or_url)
    if text.startswith(URL_SCHEMES):
        try:
            from cached_path import cached_path
        except ImportError:  # pragma: no cover - cached-path is a dependency
            raise ElmoFileError(f"Cannot download {what} {text}: the 'cached-path' package is not installed") from None
        try:
            return Path(cached_path(text))
        except Exception as exc:  # network errors come in many types
            raise ElmoFileError(
                f"Cannot download {what} {text} ({type(exc).__name__}: {exc}). "
                "Without network access, download it elsewhere and pass the local path."
            ) from None
    path = Path(text).expanduser()
    if not path.exists():
        raise ElmoFileError(f"{what} not found: {path}")
    if not path.is_file():
        raise ElmoFileError(f"{what} is not a file: {path}")
    return path


@contextlib.contextmanager
def atomic_write(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it is renamed over ``path``.

    On any error the temporary file is removed and ``path`` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600 files; give the usual permissions
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
