"""The README's recipe: compare schemes on your own 2-column NER data set with one `spacy project run`."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys

import pytest

from spacy_elmo_mix.cli.demo import PACKAGED_PROJECT

pytestmark = pytest.mark.slow  # runs subprocesses and workflows: make test-fast leaves it out


def _two_columns(source, target, skip, n_lines):
    """Token<TAB>tag lines from a CoNLL-2003 file (its first and last columns)."""
    with open(source, encoding="utf-8") as handle:
        lines = itertools.islice(handle, skip, skip + n_lines)
        out = [
            "\t".join(line.split()[::3]) if line.strip() else "" for line in lines if not line.startswith("-DOCSTART-")
        ]
    target.write_text("\n".join(out) + "\n", encoding="utf-8")


def test_own_data_set_workflow(tiny_model_files, data_dir, tmp_path):
    data = tmp_path / "bio"
    data.mkdir()
    for name, skip in (("Genia4ERtask2.iob2", 0), ("sampletest.dev", 400), ("Genia4EReval2.iob2", 800)):
        _two_columns(data_dir / "conll2003" / "train.txt", data / name, skip, 300)
    project = tmp_path / "project"
    project.mkdir()
    shutil.copyfile(PACKAGED_PROJECT, project / "project.yml")
    options, weights = tiny_model_files
    values = {
        "own_dataset": "bio",
        "own_dir": str(data),
        "own_train": "Genia4ERtask2.iob2",
        "own_dev": "sampletest.dev",
        "own_test": "Genia4EReval2.iob2",
        "own_schemes": "average baseline",
        "own_seeds": "1",
        "own_max_steps": "6",
        "eval_frequency": "3",
        "elmo_options": str(options),
        "elmo_weights": str(weights),
        "cache_dir": str(tmp_path / "cache"),
    }
    command = [sys.executable, "-m", "spacy", "project", "run", "own", str(project)]
    command += [arg for name, value in values.items() for arg in (f"--vars.{name}", value)]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    runs = project / "results" / "own" / "runs" / "bio"
    for scheme in ("average", "baseline"):
        metrics = json.loads((runs / scheme / "seed1" / "metrics.json").read_text())
        assert metrics["metric"] == "ents_f" and 0.0 <= metrics["score"] <= 1.0
    table = (project / "results" / "own" / "table.md").read_text()
    assert "`bio`" in table and "`average`" in table and "`baseline`" in table
    report = json.loads((project / "corpus" / "own" / "bio" / "cache.json").read_text())
    assert report["sentences"] > 10
