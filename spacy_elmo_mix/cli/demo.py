"""``python -m spacy_elmo_mix demo [--project-dir DIR] [--vars.NAME VALUE ...]``: the ``demo`` workflow.

Runs ``spacy project run demo`` in the project folder, which ends by printing the table (also when
nothing changed and its ``compare-demo`` step is skipped). The project
folder is DIR if given, else the current folder when it holds a ``project.yml`` (a source checkout),
else ``./spacy-elmo-mix-project``; a folder without ``project.yml`` gets a copy of the one shipped
with the package (an existing one is never overwritten). The demo needs CoNLL-2003
(``train.txt``, ``valid.txt``, ``test.txt``) in ``DATA_DIR/conll2003``: pass
``--vars.data_dir DATA_DIR`` (default ``../shared/data``, relative to the project folder). Extra
``--vars.NAME VALUE`` arguments override the project's variables.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

from ..errors import ElmoFileError
from ..workflow.convert import resolve_dataset, split_files
from . import HelpFormatter, description, program

PACKAGED_PROJECT = Path(__file__).resolve().parents[1] / "project.yml"
DEFAULT_FOLDER = "spacy-elmo-mix-project"


def project_dir(given: Optional[str]) -> Path:
    """The project folder (see the module docstring), holding a ``project.yml`` when this returns.

    given: the --project-dir value (None: the current folder if it has a project.yml, else
    ``./spacy-elmo-mix-project``).
    """
    root = (
        Path(given) if given else (Path.cwd() if (Path.cwd() / "project.yml").exists() else Path.cwd() / DEFAULT_FOLDER)
    )
    if root.exists() and not root.is_dir():
        raise ElmoFileError(f"{root}: exists and is not a folder; give --project-dir a folder")
    if not (root / "project.yml").exists():
        root.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PACKAGED_PROJECT, root / "project.yml")
        print(f"created the project folder {root} (project.yml copied from the package)")
    return root


def _var(argv: List[str], name: str, default: str) -> str:
    """The value of ``--vars.NAME`` in ``argv`` (``--vars.NAME VALUE`` or ``--vars.NAME=VALUE``), else ``default``."""
    flag = f"--vars.{name}"
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return default


def _pop_option(argv: List[str], flag: str) -> Optional[str]:
    """Remove ``flag VALUE`` (or ``flag=VALUE``) from ``argv`` and return VALUE (None: absent)."""
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            value = argv[i + 1]
            del argv[i : i + 2]
            return value
        if arg.startswith(flag + "="):
            return argv.pop(i).split("=", 1)[1]
    return None


def help_parser() -> argparse.ArgumentParser:
    """The parser that prints ``demo --help``. :func:`main` reads ``--project-dir`` itself and passes
    every other argument on to ``spacy project run`` as it is, so this parser never parses."""
    parser = argparse.ArgumentParser(
        prog=program("demo"),
        usage="%(prog)s [-h] [--project-dir DIR] [--vars.NAME VALUE ...]",
        description=description(__doc__),
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "--project-dir",
        metavar="DIR",
        help=f"the project folder (default: the current folder when it holds a project.yml, else ./{DEFAULT_FOLDER})",
    )
    parser.add_argument(
        "--vars.NAME",
        metavar="VALUE",
        dest="vars",
        help="set the project variable NAME (see the folder's project.yml), e.g. --vars.data_dir DATA_DIR or --vars.workers 2",
    )
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-h" in argv or "--help" in argv:
        help_parser().print_help()
        return 0
    root = project_dir(_pop_option(argv, "--project-dir"))
    dataset = _var(argv, "demo_dataset", "conll2003")
    data_dir = Path(_var(argv, "data_dir", "../shared/data"))
    data_dir = (data_dir if data_dir.is_absolute() else root / data_dir) / dataset
    spec = resolve_dataset(dataset)
    try:
        split_files(spec, data_dir)
    except ElmoFileError as exc:
        files = ", ".join(spec.files.values())
        raise ElmoFileError(
            f"the demo needs the {dataset} data set ({files} in {data_dir}): {exc}; pass --vars.data_dir PATH (see project.yml assets)"
        ) from exc
    started = time.time()
    code = subprocess.call([sys.executable, "-m", "spacy", "project", "run", "demo", str(root), *argv])
    if code != 0:
        return code
    table = Path(_var(argv, "results_dir", "results"))
    table = (table if table.is_absolute() else root / table) / "demo" / "table.md"
    if table.exists() and table.stat().st_mtime < started:  # compare-demo was skipped: it printed nothing
        print(table.read_text(encoding="utf-8"))
    return 0
