"""The package's layering (docs/contributing.md, "How the repository is organised"): a module imports
only from its own layer or the ones below, and the bottom layer's plain torch code imports neither
spaCy nor thinc. Read from the source (``ast``), so a lazy import inside a function counts too."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, Tuple

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "spacy_elmo_mix"
SHARED = {"errors", "atomic", "about", "__init__", "default_model"}
LEVELS = {"bilm": 1, "tagging": 1, "cache": 1, "pretrain": 1, "layers": 2, "workflow": 4, "cli": 5, "__main__": 5}
COMPONENTS = 3  # the package's top-level modules: the components and their registered functions
PLAIN_TORCH = {"bilm", "tagging"}


def _part(module: str) -> str:
    """``a.b.c`` (relative to the package) -> its first part."""
    return module.split(".")[0]


def _level(part: str) -> int:
    return 0 if part in SHARED else LEVELS.get(part, COMPONENTS)


def _imports(path: Path) -> Iterator[Tuple[int, str]]:
    """(line, module) of every import in ``path``: package modules relative to the package
    (``bilm.modules``), others as written (``spacy.tokens``)."""
    here = path.relative_to(PACKAGE).with_suffix("").parts
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.name
                yield node.lineno, name[len("spacy_elmo_mix.") :] if name.startswith("spacy_elmo_mix.") else name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(here[: len(here) - node.level])
                target = ".".join(base + ([node.module] if node.module else []))
                names = [target] if node.module else [f"{target}.{a.name}".lstrip(".") for a in node.names]
                for name in names:
                    yield node.lineno, name or "__init__"
            elif node.module and node.module.startswith("spacy_elmo_mix"):
                rest = node.module[len("spacy_elmo_mix.") :]
                yield node.lineno, rest or "__init__"
            elif node.module:
                yield node.lineno, node.module


# The package's own __init__ is its facade: it exposes ElmoEmbedder (bilm/) lazily, from any layer.
SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if p != PACKAGE / "__init__.py")


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(PACKAGE)) for p in SOURCES])
def test_no_upward_imports(path):
    part = _part(".".join(path.relative_to(PACKAGE).with_suffix("").parts))
    level = _level(part)
    package_parts = {p.name if p.is_dir() else p.stem for p in PACKAGE.iterdir()}
    for line, module in _imports(path):
        target = _part(module)
        if target not in package_parts:
            if part in PLAIN_TORCH:
                assert target not in ("spacy", "thinc"), f"{path.name}:{line} imports {module} into plain torch code"
            continue
        assert _level(target) <= level, f"{path.relative_to(PACKAGE)}:{line} imports {module} from a layer above"


def test_the_checker_sees_an_upward_import(tmp_path, monkeypatch):
    """The check can fail: a bilm/ module importing from layers/ is caught."""
    fake = tmp_path / "spacy_elmo_mix"
    (fake / "bilm").mkdir(parents=True)
    (fake / "layers").mkdir()
    (fake / "bilm" / "x.py").write_text("from ..layers.listener import ElmoListener\n", encoding="utf-8")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    with pytest.raises(AssertionError, match="from a layer above"):
        test_no_upward_imports(fake / "bilm" / "x.py")
