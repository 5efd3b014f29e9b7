"""``python -m spacy elmo COMMAND [ARGS]``: the package's commands on spaCy's command line.

spaCy imports this module through the package's ``spacy_cli`` entry point (``setup.cfg``) when its
command line starts (``spacy.cli.setup_cli`` loads ``registry.cli``), so importing it must stay cheap:
typer and spaCy's CLI app are loaded by then, everything else is imported when ``elmo`` runs. The
``elmo`` command parses nothing itself: it hands every argument after it, ``--help`` and ``--``
included, to :func:`spacy_elmo_mix.__main__.run`, so that both command lines take the same flags,
print the same help and errors (one line, status 1) and exit with the same status.
"""

from __future__ import annotations

import sys
from typing import List

import typer
from spacy.cli import app

HELP = "Run a command of spacy-elmo-mix, ELMo for spaCy: elmo --help lists them, elmo COMMAND --help shows one."
SHORT_HELP = "ELMo for spaCy: the spacy-elmo-mix commands."


def forwarded_args(parsed: List[str]) -> List[str]:
    """The arguments after ``elmo`` as given. click drops the first ``--`` from ``parsed`` (its
    extra arguments), which our commands read as the end of their options (``embed -- -x``), so
    the process's own arguments are used when they are the same command line."""
    given = sys.argv[2:] if sys.argv[1:2] == ["elmo"] else None
    if given is not None and "--" in given:
        without = list(given)
        without.remove("--")
        if without == list(parsed):
            return given
    return list(parsed)


@app.command(
    "elmo",
    help=HELP,
    short_help=SHORT_HELP,
    add_help_option=False,
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def elmo_cli(ctx: typer.Context) -> None:
    from ..__main__ import run

    raise typer.Exit(run(forwarded_args(ctx.args)))
