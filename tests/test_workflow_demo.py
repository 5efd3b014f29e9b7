"""The project's ``demo`` workflow, end to end on a tiny slice (what ``make demo`` runs, shrunk)."""
from __future__ import annotations

import json
import subprocess
import sys

from elmo_testing import REPO


def test_demo_workflow_runs_end_to_end(tiny_model_files, data_dir, tmp_path):
    options, weights = tiny_model_files
    args = {
        "data_dir": str(data_dir),
        "results_dir": str(tmp_path / "results"),
        "corpus_dir": str(tmp_path / "corpus"),
        "cache_dir": str(tmp_path / "cache"),
        "demo_sentences": "40",
        "demo_schemes": "average weighted12",
        "demo_seeds": "1 2",
        "demo_max_steps": "10",
        "demo_eval_frequency": "5",
        "elmo_options": str(options),
        "elmo_weights": str(weights),
    }
    command = [sys.executable, "-m", "spacy_elmo_mix", "demo"]
    for name, value in args.items():
        command += [f"--vars.{name}", value]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    demo = tmp_path / "results" / "demo"
    runs = sorted(demo.glob("runs/conll2003/*/seed*/metrics.json"))
    assert len(runs) == 4
    for path in runs:
        metrics = json.loads(path.read_text())
        assert 0.0 <= metrics["score"] <= 1.0 and metrics["train_seconds"] > 0
    weighted12 = json.loads((demo / "runs/conll2003/weighted12/seed1/metrics.json").read_text())
    assert len(weighted12["layer_weights"]["ner"]["weights"]) == 2
    table = (demo / "table.md").read_text()
    assert "`weighted12`" in table and "`average`" in table and "CoNLL-2003" in table
    assert (demo / "scores.png").stat().st_size > 1000
    assert "| CoNLL-2003" in result.stdout  # the demo prints its table
    assert any((tmp_path / "cache").iterdir())  # the cache step filled the shared layer cache
