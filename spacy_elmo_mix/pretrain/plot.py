"""The training curve as a PNG: training perplexity (smoothed) and held-out perplexities by step."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Dict, List, Optional, Union

from ..atomic import atomic_write

WINDOW = 50


def plot_training_curve(
    history: Dict[str, List[List[float]]], path: Union[str, Path], unigram_ppl: Optional[float] = None
) -> Path:
    """Draw ``history`` (as kept by the Trainer) into ``path``; the unigram perplexity as a reference line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    train = history["train"]
    if train:
        steps = [r[0] for r in train]
        losses = [(r[1] + r[2]) / 2 for r in train]
        ax.plot(
            steps,
            [math.exp(v) for v in _running_mean(losses, WINDOW)],
            label=f"training (mean of {WINDOW} steps, fw/bw average)",
            lw=1,
        )
    heldout = history["heldout"]
    if heldout:
        ax.plot([r[0] for r in heldout], [r[1] for r in heldout], "o-", label="held-out forward", ms=3)
        ax.plot([r[0] for r in heldout], [r[2] for r in heldout], "s-", label="held-out backward", ms=3)
    if unigram_ppl:
        ax.axhline(unigram_ppl, color="gray", ls="--", label=f"unigram held-out ({unigram_ppl:.0f})")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("perplexity")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    fig.tight_layout()
    with atomic_write(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return Path(path)


def _running_mean(values: List[float], window: int) -> List[float]:
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out
