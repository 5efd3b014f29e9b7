"""``python -m spacy_elmo_mix COMMAND [ARGS]``: the package's command line.

Each command lives in its own module under ``spacy_elmo_mix.cli`` and exposes ``main(argv) -> int``;
modules are imported only when their command runs. ``python -m spacy elmo COMMAND [ARGS]`` is the
same command line, reached through spaCy's (``spacy_elmo_mix.cli.spacy_command``).
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import List, Optional

from .errors import DEBUG_VARIABLE, ElmoMixError, debug_requested, describe_error

COMMANDS = {
    "embed": (
        "spacy_elmo_mix.cli.embed",
        "print ELMo layers for sentences (options/weights files or the default model)",
    ),
    "demo": ("spacy_elmo_mix.cli.demo", "run the demo workflow (the README's main job)"),
    "weights": ("spacy_elmo_mix.cli.weights", "print the learned layer weights of a trained pipeline"),
    "pretrain": ("spacy_elmo_mix.cli.pretrain", "pretrain an ELMo biLM on plain text and export it"),
    "cache": ("spacy_elmo_mix.cli.cache", "precompute the ELMo layer cache for .spacy corpora"),
    "convert": ("spacy_elmo_mix.cli.convert", "convert CoNLL / WNUT / CoNLL-U data to .spacy files"),
    "compare": ("spacy_elmo_mix.cli.compare", "tabulate, test and plot the results of the scheme comparison"),
    "run": ("spacy_elmo_mix.cli.run", "train and evaluate one dataset x scheme x seed (a grid job)"),
    "grid": ("spacy_elmo_mix.cli.grid", "train and evaluate a grid of datasets x schemes x seeds"),
}


def usage() -> str:
    lines = [
        "usage: python -m spacy_elmo_mix COMMAND [ARGS] [--debug]  (COMMAND --help for its options;",
        "       --debug shows the traceback of a failure); also: python -m spacy elmo COMMAND [ARGS]",
        "",
        "commands:",
    ]
    lines += [f"  {name:<10} {help_}" for name, (_, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    """Run one command. Expected failures (:class:`~spacy_elmo_mix.errors.ElmoMixError`, and operating
    system errors that name their file) print one line and return 1; ``--debug`` anywhere on the
    command line (or ``SPACY_ELMO_MIX_DEBUG=1``) lets them propagate with their traceback."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--debug" in argv:
        os.environ[DEBUG_VARIABLE] = "1"  # commands that report errors themselves read it too
        argv = [arg for arg in argv if arg != "--debug"]
    debug = debug_requested()
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    try:
        return int(module.main(rest) or 0)
    except KeyboardInterrupt:
        if debug:
            raise
        print("interrupted", file=sys.stderr)
        return 130
    except (ElmoMixError, OSError) as exc:
        if debug or (isinstance(exc, OSError) and not exc.filename):
            raise
        print(f"error: {describe_error(exc)}", file=sys.stderr)
        return 1


def run(argv: Optional[List[str]] = None) -> int:
    """:func:`main` for a process whose output may be cut short: when the reader of stdout goes away
    (``... | head``), end quietly with status 1, as the Python documentation recommends (stdout is
    pointed at the null device, so that flushing it at exit raises no second error)."""
    try:
        try:
            return main(argv)
        finally:  # also after SystemExit (argparse's --help): a closed pipe fails here, not at exit
            sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(run())
