"""File helpers: resolving paths or URLs."""
from __future__ import annotations

from pathlib import Path
from typing import Union

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
