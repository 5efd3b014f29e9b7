"""File helpers: resolving paths or URLs, with bounded downloads.

Downloads go through cached-path (one cached copy per URL and ETag) with this package's limits on
http(s): a connect timeout and a read timeout (seconds without a byte from the server), and one
retry with a short backoff for connection errors and 502/503/504 answers (none after a read time-out:
a server silent for that long is not waited for twice). cached-path's own client
has no timeout (a server that accepts and never answers hangs it forever) and retries five times.
The limit is ``DEFAULT_TIMEOUT`` seconds, or the ``SPACY_ELMO_MIX_DOWNLOAD_TIMEOUT`` environment
variable, or ``timeout=`` of :func:`resolve_path`.
"""

from __future__ import annotations

import logging
import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional, Union

from ..errors import ElmoConfigError, ElmoFileError

URL_SCHEMES = ("http://", "https://", "s3://", "gs://", "hf://")
DEFAULT_TIMEOUT = 10.0
TIMEOUT_ENV = "SPACY_ELMO_MIX_DOWNLOAD_TIMEOUT"
RETRIES = 1
_client_lock = threading.Lock()


def download_timeout(timeout: Optional[float] = None) -> float:
    """The download timeout in seconds: ``timeout``, else ``$SPACY_ELMO_MIX_DOWNLOAD_TIMEOUT``, else
    ``DEFAULT_TIMEOUT``; a value that is not a positive number raises ElmoConfigError."""
    value = timeout if timeout is not None else os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT)
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not seconds > 0:
        where = "timeout" if timeout is not None else TIMEOUT_ENV
        raise ElmoConfigError(f"{where} must be a positive number of seconds, got {value!r}")
    return seconds


def resolve_path(path_or_url: Union[str, Path], what: str = "ELMo file", timeout: Optional[float] = None) -> Path:
    """A local path for ``path_or_url``; URLs are downloaded once into cached-path's cache.

    what: what the file is, for error messages. timeout: seconds to connect and between bytes of
    an http(s) download (see :func:`download_timeout`). Offline or unreachable URLs raise
    :class:`ElmoFileError` naming the URL, within about twice the timeout (one retry).
    """
    text = str(path_or_url)
    if text.startswith(URL_SCHEMES):
        seconds = download_timeout(timeout)
        try:
            from cached_path import cached_path
        except ImportError:  # pragma: no cover - cached-path is a dependency
            raise ElmoFileError(f"Cannot download {what} {text}: the 'cached-path' package is not installed") from None
        try:
            with _bounded_http(seconds):
                return Path(cached_path(text, quiet=True))
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


@contextmanager
def _bounded_http(seconds: float) -> Iterator[None]:
    """cached-path's http(s) client replaced by one with timeouts and one retry, for this call; its
    warnings (which would add lines to the one-line error) silenced meanwhile."""
    from cached_path import schemes

    client = _bounded_client(seconds)
    log = logging.getLogger("cached_path")
    with _client_lock:
        level, log.level = log.level, logging.CRITICAL
        previous = {s: schemes._SCHEME_TO_CLIENT.get(s) for s in client.scheme}
        schemes.add_scheme_client(client)
        try:
            yield
        finally:
            log.setLevel(level)
            for scheme, old in previous.items():
                if old is None:
                    schemes._SCHEME_TO_CLIENT.pop(scheme, None)
                else:
                    schemes._SCHEME_TO_CLIENT[scheme] = old


def _bounded_client(seconds: float):
    """A subclass of cached-path's HttpClient whose requests time out after ``seconds``."""
    import requests
    from cached_path.schemes.http import RECOVERABLE_SERVER_ERROR_CODES, HttpClient, RecoverableServerError
    from requests.adapters import HTTPAdapter
    from urllib3.util.retry import Retry

    def session(headers) -> requests.Session:
        s = requests.Session()
        retry = Retry(total=RETRIES, read=0, backoff_factor=0.5, status_forcelist=RECOVERABLE_SERVER_ERROR_CODES)
        for prefix in ("http://", "https://"):
            s.mount(prefix, HTTPAdapter(max_retries=retry))
        s.headers.update(headers or {})
        return s

    class BoundedHttpClient(HttpClient):
        @property
        def head_response(self):
            if self._head_response is None:
                with session(self.headers) as s:
                    response = _request(s.head, self.resource, RecoverableServerError, allow_redirects=True)
                self.validate_response(response)
                self._head_response = response
            return self._head_response

        def get_resource(self, temp_file) -> None:
            with session(self.headers) as s:
                response = _request(s.get, self.resource, RecoverableServerError, stream=True)
                self.validate_response(response)
                for chunk in response.iter_content(chunk_size=1 << 16):
                    temp_file.write(chunk)

    def _request(method, url, recoverable, **kwargs):
        from urllib3.exceptions import MaxRetryError

        try:
            return method(url, timeout=(seconds, seconds), **kwargs)
        except MaxRetryError as exc:  # pragma: no cover - requests wraps these
            raise recoverable(exc.reason) from None

    return BoundedHttpClient
