"""Learning-rate schedule: linear warmup, inverse square-root decay (needs no total length), and an
optional linear cooldown to zero over the last steps of a run of known length."""

from __future__ import annotations

from typing import Optional

import torch


def warmup_inverse_sqrt(
    optimizer: torch.optim.Optimizer, warmup_steps: int, cooldown_steps: int = 0, max_steps: Optional[int] = None
) -> torch.optim.lr_scheduler.LambdaLR:
    """Scale the learning rate of update ``i`` (1-based) by ``i / warmup`` up to ``warmup``, then by
    ``sqrt(warmup / i)``; over the last ``cooldown_steps`` updates before ``max_steps`` also by
    ``(max_steps - i + 1) / cooldown_steps``, which falls linearly from 1 to ``1 / cooldown_steps``.

    warmup_steps: length of the linear warmup (0 counts as 1).
    cooldown_steps: length of the cooldown (0: none); needs ``max_steps``.
    max_steps: the update at which the cooldown ends.
    """
    warmup = max(1, warmup_steps)
    if cooldown_steps and not max_steps:
        raise ValueError("a cooldown needs max_steps, the update at which it ends")

    def factor(step: int) -> float:
        step = step + 1
        scale = step / warmup if step < warmup else (warmup / step) ** 0.5
        if cooldown_steps:
            assert max_steps is not None  # checked above
            scale *= min(1.0, max(0, max_steps - step + 1) / cooldown_steps)
        return scale

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def apply_current(scheduler: torch.optim.lr_scheduler.LambdaLR) -> None:
    """Set the optimizer's learning rates to what ``scheduler`` gives its current update (after its
    state was loaded, when the schedule may differ from the one that set them, e.g. a new cooldown)."""
    for group, base, factor in zip(scheduler.optimizer.param_groups, scheduler.base_lrs, scheduler.lr_lambdas):
        group["lr"] = base * factor(scheduler.last_epoch)
