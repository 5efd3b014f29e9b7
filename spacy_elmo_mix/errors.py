"""Exceptions raised by spacy-elmo-mix.

Every expected failure (a bad file, setting or input) raises a subclass of :class:`ElmoMixError`
whose message names the file, key or value at fault. The command line prints that message as one
line and exits with status 1 (``--debug`` shows the traceback); the Python API raises it as is.
"""

import os

DEBUG_VARIABLE = "SPACY_ELMO_MIX_DEBUG"


class ElmoMixError(Exception):
    """Base class of the package's expected failures: the message is for the user, as it stands."""


class ElmoFileError(ElmoMixError, ValueError):
    """An ELMo options, weights or cache file is missing, unreadable or malformed."""


class ElmoConfigError(ElmoMixError, ValueError):
    """A component or weighting-scheme setting does not fit the model it is used with."""


class ElmoInputError(ElmoMixError, ValueError):
    """A value given by the user (a command-line option, a corpus, a data set) is invalid."""


class ElmoInputTypeError(ElmoInputError, TypeError):
    """An argument of the Python API has the wrong type (a str where a token list is expected...)."""


def debug_requested() -> bool:
    """Whether the user asked for tracebacks (``--debug`` on the command line sets this variable)."""
    return os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")


def describe_error(exc: BaseException) -> str:
    """One line for the user: the package's own message, or an OS error with the file it concerns."""
    if isinstance(exc, OSError) and not isinstance(exc, ElmoMixError):
        target = f"{exc.filename} -> {exc.filename2}" if exc.filename2 else str(exc.filename)
        return f"{target}: {exc.strerror or type(exc).__name__}"
    return " ".join(str(exc).split("\n"))
