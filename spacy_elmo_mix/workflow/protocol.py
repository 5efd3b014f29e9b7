"""How long a run trains, on which tokens, and what the training log says about how it ended.

Two protocols:

- **converge** (the paper's): batches of ``batch_sentences`` sentences, the dev set scored once per
  epoch (every ``E = ceil(training sentences / batch_sentences)`` updates; spaCy scores after update
  ``1, E + 1, 2E + 1, ...``), training stops ``patience_epochs`` epochs after the best dev score or
  after ``max_epochs``; the pipeline of the best dev score is kept and scored on the test set.
  A run that stopped by the patience rule is *converged*; one that hit ``max_epochs`` is not.
- **steps**: a fixed budget of ``max_steps`` updates, the dev set scored every ``eval_frequency``.

``tokens``: ``given`` trains and scores on the corpus's own tokens and sentences (spaCy's
``gold_preproc``; the paper's data sets all come tokenized), ``retokenized`` on spaCy's
tokenization of the text.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional

from ..errors import ElmoInputError

TOKENS = ("given", "retokenized")
TRAIN_LOG = "train_log.jsonl"  # a run's training log: one JSON object per evaluation (step, epoch, score)


@dataclass(frozen=True)
class Protocol:
    """The training protocol of a run (see the module docstring).

    patience_epochs: epochs without a better dev score before stopping; None: the ``steps`` protocol.
    max_epochs: the most epochs (converge). batch_sentences: sentences per batch (converge).
    max_steps, eval_frequency: the budget and dev-scoring interval (steps).
    tokens: ``given`` or ``retokenized``.
    """

    patience_epochs: Optional[int] = None
    max_epochs: int = 150
    batch_sentences: int = 32
    max_steps: int = 1000
    eval_frequency: int = 200
    tokens: str = "given"

    def __post_init__(self) -> None:
        if self.tokens not in TOKENS:
            raise ElmoInputError(f"tokens must be one of {', '.join(TOKENS)}, got {self.tokens!r}")
        for name in ("max_epochs", "batch_sentences", "max_steps", "eval_frequency"):
            if getattr(self, name) < 1:
                raise ElmoInputError(f"{name} must be a positive integer, got {getattr(self, name)}")
        if self.patience_epochs is not None and self.patience_epochs < 1:
            raise ElmoInputError(f"patience_epochs must be a positive integer (or none), got {self.patience_epochs}")

    @property
    def converges(self) -> bool:
        return self.patience_epochs is not None

    @property
    def gold_preproc(self) -> bool:
        return self.tokens == "given"

    def steps_per_epoch(self, n_train: int) -> int:
        return max(1, math.ceil(n_train / self.batch_sentences))

    def settings(self, n_train: int) -> Dict[str, object]:
        """``spacy train`` overrides for a training set of ``n_train`` sentences."""
        settings: Dict[str, object] = {
            "corpora.train.gold_preproc": self.gold_preproc,
            "corpora.dev.gold_preproc": self.gold_preproc,
        }
        if not self.converges:
            return {**settings, "training.max_steps": self.max_steps, "training.eval_frequency": self.eval_frequency}
        assert self.patience_epochs is not None  # self.converges
        epoch = self.steps_per_epoch(n_train)
        return {
            **settings,
            "training.batcher": {
                "@batchers": "spacy.batch_by_sequence.v1",
                "size": self.batch_sentences,
                "get_length": None,
            },
            "training.max_steps": 0,
            "training.max_epochs": self.max_epochs,
            "training.eval_frequency": epoch,
            "training.patience": self.patience_epochs * epoch,
        }

    def describe(self, architecture: str, embed: str) -> Dict[str, object]:
        """The ``protocol`` object of ``metrics.json``: the same for every scheme of a grid."""
        described: Dict[str, object] = {"architecture": architecture, "embed": embed, "tokens": self.tokens}
        if self.converges:
            return {
                **described,
                "stopping": "patience",
                "patience_epochs": self.patience_epochs,
                "max_epochs": self.max_epochs,
                "batch": f"{self.batch_sentences} sentences",
            }
        return {**described, "stopping": "steps", "max_steps": self.max_steps, "eval_frequency": self.eval_frequency}


def how_it_ended(log_path: Path, settings: Dict[str, Any]) -> Dict[str, object]:
    """``epochs``, ``best_epoch``, ``stop_reason`` and ``converged`` of a finished run, read from the
    evaluations in its training log (``spacy-elmo-mix.LayerWeightsLogger.v1`` lines) and the
    ``settings`` it trained with (``Protocol.settings``). ``converged`` is None for a fixed budget
    (``max_steps``, no patience rule)."""
    records = [json.loads(line) for line in Path(log_path).read_text(encoding="utf-8").splitlines() if line.strip()]
    records = [r for r in records if r.get("score") is not None]
    if not records:
        raise ElmoInputError(f"{log_path}: no evaluation was logged; cannot tell how training ended")
    last = records[-1]["step"]
    best = max((r["score"], -r["step"]) for r in records)
    best_step = -best[1]
    patience = int(settings.get("training.patience") or 0)
    if patience and last - best_step >= patience:
        reason = "patience"
    elif settings.get("training.max_steps") and last >= int(settings["training.max_steps"]):
        reason = "max_steps"
    else:
        reason = "max_epochs"
    epoch = int(settings["training.eval_frequency"])
    return {
        "epochs": round(last / epoch) if patience else records[-1].get("epoch"),
        "best_epoch": round(best_step / epoch) if patience else None,
        "best_step": best_step,
        "stop_reason": reason,
        # a fixed budget (no patience rule) has nothing to converge by: not applicable
        "converged": reason == "patience" if patience else None,
    }
