"""The training loop: steps, progress, held-out evaluation, checkpoints and exact resumption.

On several processes (``torchrun``) the model is wrapped in ``DistributedDataParallel`` and every
rank trains on its share of each global batch (see :mod:`.distributed`); only rank 0 writes.
"""

from __future__ import annotations

import contextlib
import math
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union, cast

import torch
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from ..errors import ElmoInputError
from .checkpoint import CHECKPOINT_NAME, restore_rng_states, rng_states, save_checkpoint
from .config import TrainConfig
from .data import TrainingData
from .distributed import Cluster
from .evaluate import heldout_totals
from .model import LanguageModel
from .schedule import apply_current, warmup_inverse_sqrt
from .stream import StreamingData

SMOOTHING = 0.98


class Trainer:
    """Trains a :class:`LanguageModel` on :class:`TrainingData` (in memory) or :class:`StreamingData`.

    output_dir: where ``checkpoint.pt`` is written (by rank 0).
    cluster: this process's rank, the number of processes and the device (default: one CPU process).
    bf16: matrix products in bfloat16 with float32 weights, state and loss (default: on CUDA).
    history: ``{"train": [[step, forward_nll, backward_nll, tokens, elapsed_s], ...],
    "heldout": [[step, forward_ppl, backward_ppl, elapsed_s], ...], "windows": [[first_step, max_len], ...]}``,
    and ``"heldout_as_trained"`` (rows as ``"heldout"``) when the held-out windows are shorter.
    """

    def __init__(
        self,
        model: LanguageModel,
        data: Union[TrainingData, StreamingData],
        config: TrainConfig,
        output_dir: Union[str, Path],
        cluster: Cluster = Cluster(),
        bf16: Optional[bool] = None,
    ):
        self.cluster = cluster
        self.model, self.data, self.config = model.to(cluster.device), data, config
        self.bf16 = cluster.device.type == "cuda" if bf16 is None else bf16
        model.bilm.set_compute_dtype(torch.bfloat16 if self.bf16 else torch.float32)
        # Parameters a batch does not reach (rare softmax clusters) are normal: find them.
        device_ids = [cluster.device.index] if cluster.device.type == "cuda" else None
        self.network = (
            DistributedDataParallel(model, device_ids=device_ids, find_unused_parameters=True)
            if cluster.distributed
            else model
        )
        self.output_dir = Path(output_dir)
        self.optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
        self.scheduler = warmup_inverse_sqrt(
            self.optimizer, config.warmup_steps, config.cooldown_steps, config.max_steps
        )
        self.step = self.epoch = self.batch_in_epoch = 0
        self.elapsed = 0.0
        self.history: Dict[str, List[List[float]]] = {"train": [], "heldout": [], "windows": [[0, config.max_len]]}

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
        batches = self._batches()
        bar = tqdm(
            total=self.config.max_steps,
            initial=self.step,
            disable=not (progress and self.cluster.is_main),
            unit="step",
            dynamic_ncols=True,
            mininterval=5,
        )
        meter = _Meter()
        while not self._done():
            examples = next(batches, None)
            if examples is None:
                self.epoch, self.batch_in_epoch = self.epoch + 1, 0
                batches = self._batches()
                continue
            forward, backward, n = self._train_step(examples)
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

    def _batches(self) -> Iterator[list]:
        """The global batches of the current epoch from the current position on."""
        return self.data.epoch_batches(
            self.config.tokens_per_batch, self.config.seed, self.epoch, start=self.batch_in_epoch
        )

    def _train_step(self, examples) -> Tuple[float, float, int]:
        """One optimizer step on the global batch ``examples`` (this rank computes its share);
        returns (forward mean NLL, backward mean NLL, predictions per direction), all global."""
        n = sum(len(e) + 1 for e in examples)
        local, weight = self.cluster.shard(examples), self.cluster.world_size / (2 * n)
        if not local:  # fewer examples than ranks: take part in the gradient average with weight 0
            local, weight = examples[:1], 0.0
        batch = self.data.make_batch(local).to(self.cluster.device)
        with self._autocast():
            forward, backward = self.network(batch)
        self.optimizer.zero_grad(set_to_none=True)
        ((forward + backward) * weight).backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.clip_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.step += 1
        forward_sum, backward_sum = self.cluster.sum(
            [forward.item() if weight else 0.0, backward.item() if weight else 0.0]
        )
        return forward_sum / n, backward_sum / n, n

    def _autocast(self):
        """bfloat16 autocast for the softmax's matrix products on CUDA (the biLM casts by itself)."""
        if self.bf16 and self.cluster.device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _periodic(self, bar) -> None:
        cfg = self.config
        if cfg.eval_every and self.step % cfg.eval_every == 0:
            self.evaluate(bar)
        if cfg.checkpoint_every and self.step % cfg.checkpoint_every == 0:
            self.save()

    def _done(self) -> bool:
        """Whether to stop; on several ranks, true everywhere as soon as one rank's clock says so."""
        cfg = self.config
        steps_or_epochs = (cfg.max_steps is not None and self.step >= cfg.max_steps) or self.epoch >= cfg.max_epochs
        timed_out = cfg.max_minutes is not None and self.elapsed >= 60 * cfg.max_minutes
        return steps_or_epochs or self.cluster.any(timed_out)

    def evaluate(self, bar=None) -> Dict[str, float]:
        """Held-out perplexities (forward, backward), recorded in the history; when the held-out
        windows are shorter than the training windows, also on the held-out text in training windows
        (``history["heldout_as_trained"]``)."""
        if not self.data.heldout:
            return {}
        ppl = self._perplexities(self.data.heldout)
        self.history["heldout"].append([self.step, ppl["forward"], ppl["backward"], self.elapsed])
        message = f"step {self.step}: held-out perplexity forward {ppl['forward']:.1f}, backward {ppl['backward']:.1f}"
        if self.data.heldout_as_trained:
            long = self._perplexities(self.data.heldout_as_trained)
            self.history.setdefault("heldout_as_trained", []).append(
                [self.step, long["forward"], long["backward"], self.elapsed]
            )
            message += f"; in windows of {self.config.max_len}: {long['forward']:.1f}, {long['backward']:.1f}"
        if self.cluster.is_main:
            (bar.write if bar is not None else print)(message)
        return ppl

    def _perplexities(self, examples) -> Dict[str, float]:
        with self._autocast():
            local = heldout_totals(self.model, self.cluster.shard(examples), self.data.make_batch)
        forward, backward, n = self.cluster.sum(local)
        return {"forward": math.exp(forward / n), "backward": math.exp(backward / n)}

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
        """Continue from a :meth:`state_dict` (the data must be the same as when it was saved). With
        another ``max_len`` than the checkpoint's, the text is cut into other windows: training goes
        on from the start of the next epoch (a position among the old windows means nothing among the
        new ones) and ``history["windows"]`` records from which step the new length applies."""
        old_len = state["config"]["max_len"]
        varies = {"train_examples"} if old_len != self.config.max_len else set()  # the number of windows
        if _without(state["data"], varies) != _without(self.data.fingerprint(), varies):
            raise ElmoInputError(
                f"The checkpoint was trained on other data ({state['data']}), not this corpus ({self.data.fingerprint()})"
            )
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        apply_current(self.scheduler)  # the stop flags and the cooldown may have changed
        restore_rng_states(state["rng"])
        position = state["position"]
        self.step, self.epoch, self.batch_in_epoch = position["step"], position["epoch"], position["batch_in_epoch"]
        self.elapsed = state["elapsed_s"]
        self.history = state["history"]
        windows = self.history.setdefault("windows", [[0, old_len]])
        if old_len != self.config.max_len:
            windows.append([self.step, self.config.max_len])
            if self.batch_in_epoch:
                self.epoch, self.batch_in_epoch = self.epoch + 1, 0

    def save(self) -> Path:
        """Write the checkpoint atomically (rank 0 only); returns its path."""
        if self.cluster.is_main:
            save_checkpoint(self.state_dict(), self.checkpoint_path)
        return self.checkpoint_path

    def summary(self) -> Dict[str, Any]:
        """Steps, epochs, time, tokens seen and the last held-out perplexities."""
        last = self.history["heldout"][-1] if self.history["heldout"] else None
        # the records, or [None] for none (mypy types [None] as a list of records)
        long = cast(List[Optional[List[float]]], self.history.get("heldout_as_trained") or [None])[-1]
        train = self.history["train"]
        return {
            "steps": self.step,
            "epoch": self.epoch,
            "elapsed_s": self.elapsed,
            "tokens_seen": int(sum(r[3] for r in train)),
            "processes": self.cluster.world_size,
            "device": str(self.cluster.device),
            "tokens_per_s": _rate(train),
            "heldout_forward_ppl": last[1] if last else None,
            "heldout_backward_ppl": last[2] if last else None,
            "heldout_as_trained_ppl": long[1:3] if long and last and long[0] == last[0] else None,
        }


def _rate(train: List[List[float]]) -> Optional[float]:
    """Predicted tokens per second (both directions counted once) over the training history, first
    step excluded (it includes start-up); None with fewer than two steps."""
    if len(train) < 2 or train[-1][4] <= train[0][4]:
        return None
    return sum(r[3] for r in train[1:]) / (train[-1][4] - train[0][4])


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


def _without(fingerprint: Dict[str, Any], keys: set) -> Dict[str, Any]:
    return {k: v for k, v in fingerprint.items() if k not in keys}
