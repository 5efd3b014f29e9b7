"""``python -m spacy_elmo_mix demo [--vars.NAME VALUE ...]``: the project's ``demo`` workflow.

Runs ``spacy project run demo`` in the project folder (the one holding ``project.yml``: the current
folder, or the source checkout this package was installed from) and prints the resulting table.
Extra ``--vars.NAME VALUE`` arguments override the project's variables.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import List, Optional


def project_dir() -> Path:
    """The folder with ``project.yml``: the current folder or this package's source checkout."""
    for candidate in (Path.cwd(), Path(__file__).resolve().parents[2]):
        if (candidate / "project.yml").exists():
            return candidate
    raise FileNotFoundError("project.yml not found: run the demo from the spacy-elmo-mix checkout")


def _var(argv: List[str], name: str, default: str) -> str:
    flag = f"--vars.{name}"
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return default


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    try:
        root = project_dir()
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    data_dir = Path(_var(argv, "data_dir", "../shared/data"))
    data_dir = data_dir if data_dir.is_absolute() else root / data_dir
    if not data_dir.exists():
        print(f"error: the data folder {data_dir} does not exist; pass --vars.data_dir PATH (see project.yml assets)", file=sys.stderr)
        return 1
    code = subprocess.call([sys.executable, "-m", "spacy", "project", "run", "demo", str(root), *argv])
    if code != 0:
        return code
    table = Path(_var(argv, "results_dir", "results"))
    table = (table if table.is_absolute() else root / table) / "demo" / "table.md"
    if table.exists():
        print(table.read_text(encoding="utf-8"))
    return 0
