"""Command-line commands; see ``spacy_elmo_mix.__main__``.

Every command's parser uses :class:`HelpFormatter` and :func:`description`, so that each ``--help``
reads alike: the module docstring as the description, and the default of every option that has one.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The commands' ``--help`` layout: the description keeps its lines (examples stay as written),
    and the help of every option with a default value ends with ``(default: VALUE)``.

    Not added for defaults that mean "not given" (None, False, an empty list), for positional
    arguments, or where the help text names its default itself with ``%(default)s``.
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        help_ = action.help or ""
        default = action.default
        unset = (
            default is None
            or default is False
            or default is argparse.SUPPRESS
            or (isinstance(default, (list, tuple)) and not default)
        )
        if unset or not action.option_strings or "%(default)" in help_:
            return help_
        return f"{help_} (default: %(default)s)"


def description(doc: str) -> str:
    """A command module's docstring as its ``--help`` description, in plain text: without the
    command line that opens the docstring (the usage line shows it) and without reStructuredText's
    marks (the double backquotes of literals, roles such as ``:func:``, the ``::`` before an example)."""
    text = re.sub(r"\A``python -m spacy_elmo_mix [^`]*``: (\w)", lambda m: m.group(1).upper(), doc.strip())
    text = re.sub(r":\w+:`~?([^`]+)`", r"\1", text)  # :func:`name` -> name
    return re.sub(r"::$", ":", text.replace("``", ""), flags=re.MULTILINE)


def program(command: str) -> str:
    """The command line of ``command`` as the user started it, for its usage line:
    ``python -m spacy elmo COMMAND`` (or ``spacy elmo COMMAND``) through spaCy's command line,
    ``python -m spacy_elmo_mix COMMAND`` otherwise."""
    if sys.argv[1:2] == ["elmo"] and sys.argv[0]:
        started = Path(sys.argv[0])
        if started.name == "__main__.py" and started.parent.name == "spacy":
            return f"python -m spacy elmo {command}"
        if started.name == "spacy":
            return f"spacy elmo {command}"
    return f"python -m spacy_elmo_mix {command}"
