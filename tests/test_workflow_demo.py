"""The project's ``demo`` workflow, end to end on a tiny slice (what ``make demo`` runs, shrunk), run
outside the checkout as from an installed package (the packaged project.yml is copied to a new folder)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from elmo_testing import REPO

pytestmark = pytest.mark.slow  # runs subprocesses and workflows: make test-fast leaves it out


def test_demo_workflow_runs_end_to_end(tiny_model_files, data_dir, tmp_path):
    options, weights = tiny_model_files
    args = {
        "data_dir": str(data_dir),
        "results_dir": str(tmp_path / "results"),
        "corpus_dir": str(tmp_path / "corpus"),
        "cache_dir": str(tmp_path / "cache"),
        "demo_sentences": "40",
        "demo_schemes": "weighted12 baseline",
        "demo_seeds": "1 2",
        "demo_max_steps": "10",
        "demo_eval_frequency": "5",
        "elmo_options": str(options),
        "elmo_weights": str(weights),
    }
    command = [sys.executable, "-m", "spacy_elmo_mix", "demo"]
    for name, value in args.items():
        command += [f"--vars.{name}", value]
    lock_before = (REPO / "project.lock").exists()
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    project = tmp_path / "spacy-elmo-mix-project"
    assert (project / "project.lock").exists() and (REPO / "project.lock").exists() == lock_before
    demo = tmp_path / "results" / "demo"
    runs = sorted(demo.glob("runs/conll2003/*/seed*/metrics.json"))
    assert len(runs) == 4
    for path in runs:
        metrics = json.loads(path.read_text())
        assert 0.0 <= metrics["score"] <= 1.0 and metrics["train_seconds"] > 0
    weighted12 = json.loads((demo / "runs/conll2003/weighted12/seed1/metrics.json").read_text())
    assert len(weighted12["layer_weights"]["ner"]["weights"]) == 2
    table = (demo / "table.md").read_text()
    assert "`weighted12`" in table and "`baseline`" in table and "CoNLL-2003" in table
    assert (demo / "scores.png").stat().st_size > 1000
    assert result.stdout.count("| CoNLL-2003") == 1  # the demo prints its table, once
    assert any((tmp_path / "cache").iterdir())  # the cache step filled the shared layer cache
    identity = json.loads((demo / "runs/conll2003/weighted12/seed1/metrics.json").read_text())["identity"]
    assert "--max-steps 10" in identity["command"] and len(identity["files"]) == 6  # 3 corpus, config, 2 biLM

    again = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "4 jobs: 0 ok, 4 skipped" in again.stdout  # nothing changed: nothing retrained
    assert "Skipping 'convert-demo'" in again.stdout and "Skipping 'compare-demo'" in again.stdout
    assert again.stdout.count("| CoNLL-2003") == 1  # compare skipped: the demo prints the table itself


def test_demo_names_the_data_it_needs(tmp_path):
    command = [
        sys.executable,
        "-m",
        "spacy_elmo_mix",
        "demo",
        "--project-dir",
        str(tmp_path / "p"),
        "--vars.data_dir",
        str(tmp_path),
    ]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "the demo needs the conll2003 data set" in result.stderr and "train.txt" in result.stderr
