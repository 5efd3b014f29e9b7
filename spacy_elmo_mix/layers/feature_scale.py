"""``ScaledNorm``: ELMo vectors brought to a set scale before they meet other embeddings.

A biLM's raw layers have whatever scale its training gave them (the embedded model: root mean square
about 2.9 for the token layer, 0.9 and 1.3 for the LSTM layers; published models differ again).
Concatenated with spaCy's hash embeddings, whose Maxout output is layer-normalized (root mean square
1), raw ELMo vectors dominate the projection's input, and at short training budgets they slow
learning down (docs/architectures.md, "Feature scale"; ``results/elmo_hash/``). This layer normalizes each
token's vector (mean 0, root mean square 1 over its dimensions), then multiplies it by a learned
scalar that starts at ``scale``, so the share of ELMo in the projection's input is a setting, the
same for every biLM and scheme. A small scale also slows the learning of ELMo's projection: it
pays at short budgets and costs at long ones (``results/value/``).
"""

from __future__ import annotations

from typing import Any, Callable, Tuple, cast

from thinc.api import Model
from thinc.types import Floats2d

from .normalize import normalize

EPSILON = 1e-6


def ScaledNorm(scale: float = 1.0, trainable: bool = True) -> Model[Floats2d, Floats2d]:
    """Per-token normalization to root mean square 1, times a scalar ``s`` (initially ``scale``).

    scale: the root mean square of each output vector at the start (> 0).
    trainable: learn ``s`` (otherwise it stays ``scale``).
    """
    return Model(
        "scaled_norm",
        scaled_norm_forward,
        init=scaled_norm_init,
        params={"s": None},
        attrs={"initial_scale": float(scale), "trainable": bool(trainable)},
    )


def scaled_norm_init(model: Model, X=None, Y=None) -> None:
    model.set_param("s", model.ops.asarray1f([model.attrs["initial_scale"]]))


def scaled_norm_forward(model: Model, X: Floats2d, is_train: bool) -> Tuple[Floats2d, Callable]:
    s = model.get_param("s")
    normed, norm_backprop = normalize(model.ops.xp, X, (1,), EPSILON)
    Y = normed * s[0]

    def backprop(dY: Floats2d) -> Floats2d:
        if model.attrs["trainable"]:
            # cast: thinc's stubs have no Floats2d.sum() over all elements
            model.inc_grad("s", model.ops.asarray1f([float(cast(Any, dY * normed).sum())]))
        return norm_backprop(dY * s[0])

    return Y, backprop
