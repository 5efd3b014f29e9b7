"""Normalization to mean 0 and variance 1 over chosen axes, with its exact backward pass (shared by
ScalarMix's ``layer_norm`` and ``ScaledNorm``)."""

from __future__ import annotations

from typing import Callable, Sequence, Tuple

from thinc.types import FloatsXd


def normalize(xp, x: FloatsXd, axes: Sequence[int], epsilon: float) -> Tuple[FloatsXd, Callable[[FloatsXd], FloatsXd]]:
    """``(x - mean) / sqrt(var + epsilon)``, mean and variance over ``axes``; returns it and its backprop.

    An empty ``x`` is returned as it is (its backprop passes gradients through).
    """
    if x.size == 0:
        return x, lambda d: d
    axes = tuple(axes)
    centered = x - x.mean(axis=axes, keepdims=True)
    inv_std = 1.0 / xp.sqrt((centered**2).mean(axis=axes, keepdims=True) + epsilon)
    normed = centered * inv_std

    def backprop(d: FloatsXd) -> FloatsXd:
        # d/dx of (x - mean) / std with mean and variance over the same elements.
        return inv_std * (d - d.mean(axis=axes, keepdims=True) - normed * (d * normed).mean(axis=axes, keepdims=True))

    return normed, backprop
