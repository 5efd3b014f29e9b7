"""Training hyperparameters (everything except the model's size, which is a BiLMOptions)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Dict, Optional


@dataclass
class TrainConfig:
    """Settings of one pretraining run.

    max_len: tokens per training window (longer lines are cut). The biLM learns what it sees: one
        trained on short windows fails on longer sequences (see pretraining/README.md), so the
        default is the ``elmo`` component's longest sequence (its ``max_length``, 256).
    heldout_max_len: tokens per held-out window (None: ``max_len``); a run resumed with another
        ``max_len`` keeps its held-out windows, so that its held-out curve stays comparable.
    tokens_per_batch: predicted tokens per batch and direction (about).
    lr: peak Adam learning rate; warmup_steps: linear warmup, then inverse square-root decay.
    cooldown_steps: over the last this many steps before ``max_steps`` the learning rate also falls
        linearly towards 0 (0: no cooldown; needs ``max_steps``).
    dropout: dropout between the biLM's layers during training.
    clip_norm: gradient norm clipping threshold.
    seed: seed of the initialisation, the data order and dropout.
    max_steps, max_minutes: stop after this many steps / minutes of training (None: no limit).
    max_epochs: stop after this many passes over the training data.
    eval_every: held-out perplexity every this many steps (0: only at the end).
    checkpoint_every: checkpoint every this many steps (0: only at the end).
    init_weights: a bilm-tf ``weights.hdf5`` (path or URL) the biLM starts from instead of random
        weights (a published ELMo or a model this command exported; the softmax starts fresh); None: random.
    """

    max_len: int = 256
    heldout_max_len: Optional[int] = None
    tokens_per_batch: int = 2000
    lr: float = 1.5e-3
    warmup_steps: int = 200
    cooldown_steps: int = 0
    dropout: float = 0.1
    clip_norm: float = 1.0
    seed: int = 0
    max_steps: Optional[int] = None
    max_minutes: Optional[float] = None
    max_epochs: int = 10
    eval_every: int = 500
    checkpoint_every: int = 200
    init_weights: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "TrainConfig":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})
