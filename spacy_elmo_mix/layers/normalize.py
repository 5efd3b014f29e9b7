"""Normalization to mean 0 and variance 1 over chosen axes, with its exact backward pass (shared by
ScalarMix's ``layer_norm`` and ``ScaledNorm``)."""

from __future__ import annotations

from typing import Any, Callable, Sequence, Tuple, cast

from thinc.types import FloatsXdT


def normalize(
    xp, x: FloatsXdT, axes: Sequence[int], epsilon: float
) -> Tuple[FloatsXdT, Callable[[FloatsXdT], FloatsXdT]]:
    """``(x - mean) / sqrt(var + epsilon)``, mean and variance over ``axes``; returns it and its backprop.

    An empty ``x`` is returned as it is (its backprop passes gradients through).
    """
    if x.size == 0:
        return x, lambda d: d
    axes = tuple(axes)
    # cast: thinc's array stubs have no mean over several axes (nor any on 3d and 4d arrays)
    centered = x - cast(Any, x).mean(axis=axes, keepdims=True)
    inv_std = 1.0 / xp.sqrt((centered**2).mean(axis=axes, keepdims=True) + epsilon)
    normed = centered * inv_std

    def backprop(d: FloatsXdT) -> FloatsXdT:
        # d/dx of (x - mean) / std with mean and variance over the same elements.
        return inv_std * (
            d - cast(Any, d).mean(axis=axes, keepdims=True) - normed * (d * normed).mean(axis=axes, keepdims=True)
        )

    return normed, backprop
