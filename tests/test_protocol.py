"""The training protocols: the spaCy settings they make and how a run's log says it ended."""

from __future__ import annotations

import json

import pytest

from spacy_elmo_mix.errors import ElmoInputError
from spacy_elmo_mix.workflow.protocol import Protocol, how_it_ended


def test_converge_protocol_counts_in_epochs():
    settings = Protocol(patience_epochs=5, max_epochs=50, batch_sentences=32).settings(n_train=500)
    assert settings["training.eval_frequency"] == 16  # ceil(500 / 32) batches per epoch
    assert settings["training.patience"] == 80 and settings["training.max_steps"] == 0
    assert settings["training.max_epochs"] == 50 and settings["corpora.train.gold_preproc"] is True
    assert settings["training.batcher"] == {"@batchers": "spacy.batch_by_sequence.v1", "size": 32, "get_length": None}
    steps = Protocol(max_steps=300, eval_frequency=100, tokens="retokenized").settings(n_train=500)
    assert steps["training.max_steps"] == 300 and steps["corpora.dev.gold_preproc"] is False
    assert "training.patience" not in steps


@pytest.mark.parametrize(
    "kwargs", [{"patience_epochs": 0}, {"max_epochs": 0}, {"tokens": "spacy"}, {"batch_sentences": -1}]
)
def test_bad_protocol_settings_fail_loudly(kwargs):
    with pytest.raises(ElmoInputError):
        Protocol(**kwargs)


def _log(tmp_path, scores, every):
    path = tmp_path / "train_log.jsonl"
    lines = [json.dumps({"step": i * every, "epoch": i, "score": s}) for i, s in enumerate(scores)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_how_it_ended_tells_patience_from_max_epochs(tmp_path):
    settings = Protocol(patience_epochs=2, max_epochs=6).settings(n_train=64)  # 2 steps per epoch
    stopped = how_it_ended(_log(tmp_path, [0.1, 0.5, 0.4, 0.45], every=2), settings)
    assert stopped == {"epochs": 3, "best_epoch": 1, "best_step": 2, "stop_reason": "patience", "converged": True}
    # still improving at the last evaluation: the run hit max_epochs and did not converge
    capped = how_it_ended(_log(tmp_path, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], every=2), settings)
    assert capped["stop_reason"] == "max_epochs" and not capped["converged"] and capped["best_epoch"] == 5
    budget = Protocol(max_steps=4, eval_frequency=2).settings(n_train=64)
    ended = how_it_ended(_log(tmp_path, [0.1, 0.2, 0.3], every=2), budget)
    assert ended["stop_reason"] == "max_steps" and ended["converged"] is None  # nothing to converge by
    with pytest.raises(ElmoInputError, match="no evaluation"):
        how_it_ended(_log(tmp_path, [], every=2), settings)
