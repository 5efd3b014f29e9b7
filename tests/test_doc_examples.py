"""Every fenced example of README.md and docs/ runs as written, or says on the line before its fence
why it cannot run here (``<!-- example not run: REASON -->``).

- ``python`` blocks run each in a fresh interpreter. What a reader brings is given to them
  (:data:`READER_INPUTS`: ``texts``, ``train_examples``, ``options_file``, ``weight_file``,
  ``token_lists``); everything else (imports included) must be in the block.
- ``bash`` blocks run with ``bash -e`` and ``python`` being this interpreter.
- ``ini`` blocks are resolved through spaCy's registry (names, arguments and their types).

All run in one scratch folder, in the order of the pages (README first, then docs/ by name), that
holds ``elmo_pipeline`` (a saved ``elmo`` pipeline, as README's example saves it), ``sentences.txt``
and ``../shared`` (the read-only data), so the commands' relative paths mean what they mean in a
checkout. Nothing is written into the checkout.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import List, NamedTuple

import pytest
from conftest import DATA, FIXTURES, REPO

pytestmark = pytest.mark.slow  # runs subprocesses and workflows: make test-fast leaves it out

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"(?:<!-- example not run: (?P<why>[^\n]*?) -->\n)?^```(?P<lang>python|bash|ini)\n(?P<code>.*?)^```", re.S | re.M)  # fmt: skip
READER_INPUTS = textwrap.dedent(
    f"""
    import spacy as _spacy
    from spacy.training import Example as _Example

    texts = ["The bank raised its rates .", "Paris is in France ."]
    token_lists = [["I", "ate", "an", "apple"], ["Paris", "is", "in", "France", "."]]
    options_file = {str(FIXTURES / "tf_fixture" / "options.json")!r}
    weight_file = {str(FIXTURES / "tf_fixture" / "lm_weights.hdf5")!r}
    _blank = _spacy.blank("en")
    train_examples = [
        _Example.from_dict(_blank.make_doc("Ann lives in Paris ."), {{"entities": [(0, 3, "PER"), (13, 18, "LOC")]}}),
        _Example.from_dict(_blank.make_doc("Bob met Ann ."), {{"entities": [(0, 3, "PER"), (8, 11, "PER")]}}),
    ]
    del _spacy, _Example, _blank
    """
)


class Example(NamedTuple):
    page: Path
    line: int
    lang: str
    code: str
    why_not: str

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def _examples() -> List[Example]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start("lang")) + 1
            found.append(Example(page, line, match["lang"], match["code"], match["why"] or ""))
    return found


EXAMPLES = _examples()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """The folder the examples run in (``work/``, beside a link ``shared`` to the shared data)."""
    if not DATA.is_dir() or not FIXTURES.is_dir():
        pytest.skip(f"{DATA.parent} is absent: the examples read the shared data and fixtures")
    root = tmp_path_factory.mktemp("examples")
    (root / "shared").symlink_to(DATA.parent, target_is_directory=True)
    work = root / "work"
    work.mkdir()
    (work / "sentences.txt").write_text("The bank raised its rates .\nPrices rose .\n", encoding="utf-8")
    _run(["python", "-c", 'import spacy; nlp = spacy.blank("en"); nlp.add_pipe("elmo"); nlp.initialize(); nlp.to_disk("elmo_pipeline")'], work)  # fmt: skip
    return work


def _run(command: List[str], cwd: Path, stdin: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("PYTHONPATH", None)
    if command[0] == "python":
        command = [sys.executable, *command[1:]]
    done = subprocess.run(command, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(command)[:200]}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_example_runs(example: Example, scratch: Path):
    if example.why_not:
        pytest.skip(f"{example.name}: not run: {example.why_not}")
    if example.lang == "python":
        _run(["python", "-"], scratch, stdin=READER_INPUTS + "\n" + example.code)
    elif example.lang == "bash":
        _run(["bash", "-e", "-o", "pipefail", "-c", example.code], scratch)
    else:
        from spacy.util import registry
        from thinc.api import Config

        import spacy_elmo_mix.architectures  # noqa: F401 (registers the package's functions)

        # a block is one section of a config (and its subsections): resolved as the root's only one
        section = re.match(r"\[([^\]]+)\]", example.code)
        assert section, f"{example.name}: an ini block starts with its section"
        code = example.code.replace(f"[{section[1]}", "[example")
        registry.resolve(Config().from_str(code), validate=True)


def test_every_skipped_example_says_why():
    """A marker without a reason does not count; there is at least one example of each kind."""
    assert {e.lang for e in EXAMPLES} == {"python", "bash", "ini"}
    text = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
    assert text.count("<!-- example not run:") == sum(bool(e.why_not) for e in EXAMPLES)
    assert all(e.why_not.strip() for e in EXAMPLES if e.why_not)
