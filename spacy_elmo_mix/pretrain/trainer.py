"""The training loop: steps, progress, held-out evaluation, checkpoints and exact resumption."""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple, Union

import numpy as np
import torch
from tqdm import tqdm

from .batches import epoch_plan, make_batch
from .checkpoint import CHECKPOINT_NAME, restore_rng_states, rng_states, save_checkpoint
from .config import TrainConfig
from .data import TrainingData
from .evaluate import heldout_perplexity
from .model import LanguageModel
from .schedule import warmup_inverse_sqrt

SMOOTHING = 0.98


class Trainer:
    """Trains a :class:`LanguageModel` on :class:`TrainingData`.

    output_dir: where ``checkpoint.pt`` is written.
    history: ``{"train": [[step, forward_nll, backward_nll, tokens, elapsed_s], ...],
    "heldout": [[step, forward_ppl, backward_ppl, elapsed_s], ...]}``.
    """

    def __init__(self, model: LanguageModel, data: TrainingData, config: TrainConfig, output_dir: Union[str, Path]):
        self.model, self.data, self.config = model, data, config
        self.output_dir = Path(output_dir)
        self.optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
        self.scheduler = warmup_inverse_sqrt(self.optimizer, config.warmup_steps)
        self.step = self.epoch = self.batch_in_epoch = 0
        self.elapsed = 0.0
        self.history: Dict[str, List[List[float]]] = {"train": [], "heldout": []}
        self._lengths = np.array([len(e) for e in data.train])

    @property
    def checkpoint_path(self) -> Path:
        return self.output_dir / CHECKPOINT_NAME

    def train(self, progress: bool = True) -> Dict[str, Any]:
        """Run until ``max_steps``, ``max_minutes`` or ``max_epochs``; return the final state summary.

        Writes a checkpoint every ``checkpoint_every`` steps and at the end.
        progress: show a tqdm bar with loss, perplexity and tokens/s.
        """
        self.model.train()
        session_start, elapsed_before = time.monotonic(), self.elapsed
        plan = self._epoch_plan()
        bar = tqdm(total=self.config.max_steps, initial=self.step, disable=not progress, unit="step", dynamic_ncols=True, mininterval=5)
        meter = _Meter()
        while not self._done():
            if self.batch_in_epoch >= len(plan):
                self.epoch, self.batch_in_epoch = self.epoch + 1, 0
                plan = self._epoch_plan()
                continue
            forward, backward, n = self._train_step([self.data.train[i] for i in plan[self.batch_in_epoch]])
            self.batch_in_epoch += 1
            self.elapsed = elapsed_before + time.monotonic() - session_start
            self.history["train"].append([self.step, forward, backward, n, self.elapsed])
            bar.update(1)
            bar.set_postfix(meter.add((forward + backward) / 2, n), epoch=self.epoch, refresh=False)
            self._periodic(bar)
        bar.close()
        if not self.history["heldout"] or self.history["heldout"][-1][0] != self.step:
            self.evaluate(bar)
        self.save()
        return self.summary()

    def _epoch_plan(self) -> List[np.ndarray]:
        return epoch_plan(self._lengths, self.config.tokens_per_batch, self.config.seed, self.epoch)

    def _train_step(self, examples) -> Tuple[float, float, int]:
        """One optimizer step on ``examples``; returns (forward mean NLL, backward mean NLL, predictions)."""
        batch = make_batch(examples, self.data.chars, self.data.type_to_vocab)
        forward, backward = self.model(batch)
        n = batch.n_predictions
        loss = (forward + backward) / (2 * n)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.clip_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.step += 1
        return forward.item() / n, backward.item() / n, n

    def _periodic(self, bar) -> None:
        cfg = self.config
        if cfg.eval_every and self.step % cfg.eval_every == 0:
            self.evaluate(bar)
        if cfg.checkpoint_every and self.step % cfg.checkpoint_every == 0:
            self.save()

    def _done(self) -> bool:
        cfg = self.config
        return (
            (cfg.max_steps is not None and self.step >= cfg.max_steps)
            or (cfg.max_minutes is not None and self.elapsed >= 60 * cfg.max_minutes)
            or self.epoch >= cfg.max_epochs
        )

    def evaluate(self, bar=None) -> Dict[str, float]:
        """Held-out perplexities (forward, backward), recorded in the history."""
        if not self.data.heldout:
            return {}
        ppl = heldout_perplexity(self.model, self.data.heldout, self.data.chars, self.data.type_to_vocab)
        self.history["heldout"].append([self.step, ppl["forward"], ppl["backward"], self.elapsed])
        message = f"step {self.step}: held-out perplexity forward {ppl['forward']:.1f}, backward {ppl['backward']:.1f}"
        (bar.write if bar is not None else print)(message)
        return ppl

    def state_dict(self) -> Dict[str, Any]:
        """Everything needed to continue exactly: weights, optimizer, schedule, RNGs, data position."""
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "rng": rng_states(),
            "position": {"step": self.step, "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch},
            "elapsed_s": self.elapsed,
            "history": self.history,
            "config": self.config.to_dict(),
            "options": self.model.bilm.options.to_json_dict(),
            "vocab": self.data.vocab.words,
            "data": self.data.fingerprint(),
            "summary": self.data.summary,
        }

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue from a :meth:`state_dict` (the data must be the same as when it was saved)."""
        if state["data"] != self.data.fingerprint():
            raise ValueError(f"The checkpoint was trained on other data ({state['data']}), not this corpus ({self.data.fingerprint()})")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        restore_rng_states(state["rng"])
        position = state["position"]
        self.step, self.epoch, self.batch_in_epoch = position["step"], position["epoch"], position["batch_in_epoch"]
        self.elapsed = state["elapsed_s"]
        self.history = state["history"]

    def save(self) -> Path:
        """Write the checkpoint atomically; returns its path."""
        save_checkpoint(self.state_dict(), self.checkpoint_path)
        return self.checkpoint_path

    def summary(self) -> Dict[str, Any]:
        """Steps, epochs, time, tokens seen and the last held-out perplexities."""
        last = self.history["heldout"][-1] if self.history["heldout"] else None
        return {
            "steps": self.step,
            "epoch": self.epoch,
            "elapsed_s": self.elapsed,
            "tokens_seen": int(sum(r[3] for r in self.history["train"])),
            "heldout_forward_ppl": last[1] if last else None,
            "heldout_backward_ppl": last[2] if last else None,
        }


class _Meter:
    """Smoothed training loss and perplexity, and tokens per second since creation, for the progress bar."""

    def __init__(self):
        self.start, self.tokens, self.loss = time.monotonic(), 0, None

    def add(self, loss: float, tokens: int) -> Dict[str, str]:
        """Record one step's mean loss and predicted tokens; return the progress-bar fields."""
        self.tokens += tokens
        self.loss = loss if self.loss is None else SMOOTHING * self.loss + (1 - SMOOTHING) * loss
        rate = self.tokens / max(time.monotonic() - self.start, 1e-9)
        return {"loss": f"{self.loss:.3f}", "ppl": f"{math.exp(self.loss):.1f}", "tok_s": f"{rate:.0f}"}
