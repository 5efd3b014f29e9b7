"""Learning-rate schedule: linear warmup, then inverse square-root decay (needs no total length)."""
from __future__ import annotations

import torch


def warmup_inverse_sqrt(optimizer: torch.optim.Optimizer, warmup_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Scale the learning rate by ``step / warmup`` up to ``warmup``, then by ``sqrt(warmup / step)``."""
    warmup = max(1, warmup_steps)

    def factor(step: int) -> float:
        step = step + 1
        return step / warmup if step < warmup else (warmup / step) ** 0.5

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
