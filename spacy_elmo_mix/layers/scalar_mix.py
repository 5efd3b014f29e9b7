"""Weighting schemes: how a task combines ELMo layers into one vector per token.

Input: one ``[n_available_layers, n_tokens, width]`` array per doc (ELMo layer 0 = token vectors,
1.. = LSTM layers). Output: one ``[n_tokens, nO]`` array per doc.

``ScalarMix`` is AllenNLP's ScalarMix: ``gamma * sum_j softmax(s)_j * h_j`` over the chosen layers,
with ``s`` and ``gamma`` trainable or fixed; one layer, a fixed average, fixed custom weights and the
learned weighted average of Peters et al. are all settings of it. ``ConcatLayers`` concatenates.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, cast

from thinc.api import Model
from thinc.types import Floats2d, Floats3d

from ..errors import ElmoConfigError
from .normalize import normalize

LN_EPSILON = 1e-12  # AllenNLP's ScalarMix value

# Table 1 of Reimers & Gurevych (arXiv 1904.02954): the paper's column -> our settings.
# The paper numbers layers from 1; our layer indices start at 0 (0 = char-CNN token vectors).
PAPER_SCHEMES: Dict[str, Optional[Dict[str, Any]]] = {
    "layer1": dict(layers=[0], trainable=False, trainable_gamma=False),
    "layer2": dict(layers=[1], trainable=False, trainable_gamma=False),
    "layer3": dict(layers=[2], trainable=False, trainable_gamma=False),
    "concat": None,
    "average": dict(layers=[0, 1, 2], trainable=False, trainable_gamma=False),
    "weighted": dict(layers=[0, 1, 2], trainable=True, trainable_gamma=True),
    "weighted12": dict(layers=[0, 1], trainable=True, trainable_gamma=True),
}


def check_layers(layers: Optional[Sequence[int]], what: str) -> Optional[List[int]]:
    """Validate a list of distinct, non-negative layer indices (``None``: all layers)."""
    if layers is None:
        return None
    if isinstance(layers, (str, bytes)) or not isinstance(layers, Sequence) or not layers:
        raise ElmoConfigError(f"{what}: layers must be a non-empty list of layer indices or null, got {layers!r}")
    for layer in layers:
        if isinstance(layer, bool) or not isinstance(layer, int) or layer < 0:
            raise ElmoConfigError(f"{what}: layer indices are integers >= 0 (0 = token vectors), got {layer!r}")
    if len(set(layers)) != len(layers):
        raise ElmoConfigError(f"{what}: layer indices must be distinct, got {list(layers)}")
    return list(layers)


def resolve_layers(model: Model, n_available: int) -> List[int]:
    """The scheme's layers, checked against the ``n_available`` layers the biLM offers."""
    layers = model.attrs["layers"]
    if layers is None:
        return list(range(n_available))
    missing = [j for j in layers if j >= n_available]
    if missing:
        raise ElmoConfigError(
            f"The weighting scheme '{model.name}' uses ELMo layer {missing[0]} "
            f"(paper name: layer {missing[0] + 1}), but the biLM offers layers 0..{n_available - 1} "
            f"({n_available - 1} LSTM layer{'s' if n_available != 2 else ''}); choose layers among "
            f"{list(range(n_available))}"
        )
    return layers


def max_layer(model: Model) -> Optional[int]:
    """The highest layer a scheme reads (``None``: every layer the biLM has)."""
    layers = model.attrs["layers"]
    return None if layers is None else max(layers)


def ScalarMix(
    layers: Optional[List[int]] = None,
    trainable: bool = True,
    initial_weights: Optional[List[float]] = None,
    gamma: float = 1.0,
    trainable_gamma: bool = True,
    layer_norm: bool = False,
    weight_dropout: float = 0.0,
    weight_l2: float = 0.0,
) -> Model[List[Floats3d], List[Floats2d]]:
    """``gamma * sum_j softmax(s)_j * h_j`` over ``layers`` (AllenNLP ScalarMix semantics).

    layers: ELMo layer indices to mix (0 = token vectors); ``None``: all layers of the biLM.
    trainable: learn ``s``; otherwise the weights stay fixed (zeros = plain average).
    initial_weights: the normalized weights to start from (or keep, when not trainable), one per
        layer, positive; they are stored as ``s = log(w)``. ``None``: equal weights.
    gamma: initial (or fixed) scale. trainable_gamma: learn ``gamma``.
    layer_norm: normalize each layer (mean and variance over the doc's tokens and dims) before
        mixing, as AllenNLP's ``do_layer_norm``; AllenNLP takes the statistics over the whole
        batch, we take them per doc so results do not depend on batching.
    weight_dropout: during training, each layer's weight is dropped (set to -inf before the
        softmax) with this probability; at least one layer is always kept.
    weight_l2: L2 penalty on ``s`` (AllenNLP recommended 0.001), added to its gradient.
    """
    layers = check_layers(layers, "ScalarMix")
    if initial_weights is not None:
        if layers is None or len(initial_weights) != len(layers):
            raise ElmoConfigError(f"ScalarMix: initial_weights {initial_weights} need one value per layer of {layers}")
        if any((not isinstance(w, (int, float))) or w <= 0 for w in initial_weights):
            raise ElmoConfigError(f"ScalarMix: initial_weights must be positive numbers, got {initial_weights}")
    if not 0.0 <= weight_dropout < 1.0:
        raise ElmoConfigError(f"ScalarMix: weight_dropout must be in [0, 1), got {weight_dropout}")
    return Model(
        "scalar_mix",
        scalar_mix_forward,
        init=scalar_mix_init,
        dims={"nI": None, "nO": None},
        params={"s": None, "gamma": None},
        attrs={
            "layers": layers,
            "trainable": bool(trainable),
            "initial_weights": None if initial_weights is None else [float(w) for w in initial_weights],
            "initial_gamma": float(gamma),
            "trainable_gamma": bool(trainable_gamma),
            "layer_norm": bool(layer_norm),
            "weight_dropout": float(weight_dropout),
            "weight_l2": float(weight_l2),
        },
    )


def _init_dims(model: Model, X: Optional[List[Floats3d]]) -> List[int]:
    if not X:
        raise ElmoConfigError(f"{model.name} needs a sample of ELMo layers to initialize")
    n_available, _, width = X[0].shape
    layers = resolve_layers(model, n_available)
    model.set_dim("nI", width, force=True)
    model.attrs["resolved_layers"] = layers
    return layers


def scalar_mix_init(model: Model, X: Optional[List[Floats3d]] = None, Y=None) -> None:
    layers = _init_dims(model, X)
    model.set_dim("nO", model.get_dim("nI"), force=True)
    weights = model.attrs["initial_weights"] or [1.0] * len(layers)
    model.set_param("s", model.ops.asarray1f([math.log(w) for w in weights]))
    model.set_param("gamma", model.ops.asarray1f([model.attrs["initial_gamma"]]))


def normalized_weights(model: Model):
    """``softmax(s)``: the layer weights the scheme uses at prediction time."""
    return model.ops.softmax(model.get_param("s"))


def scalar_mix_forward(model: Model, X: List[Floats3d], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    xp = model.ops.xp
    layers = model.attrs["resolved_layers"]
    s, gamma = model.get_param("s"), float(model.get_param("gamma")[0])
    keep = _dropout_mask(model, len(layers)) if is_train else None
    w = model.ops.softmax(s if keep is None else xp.where(keep, s, -xp.inf))
    inputs = [x[layers] for x in X]
    normed = (
        [normalize(xp, h, (1, 2), LN_EPSILON) for h in inputs]
        if model.attrs["layer_norm"]
        else [(h, None) for h in inputs]
    )
    mixed = [xp.tensordot(w, h, axes=1) for h, _ in normed]
    Y = [gamma * m for m in mixed]

    def backprop(dY: List[Floats2d]) -> List[Floats3d]:
        dX = []
        dw = xp.zeros_like(w)
        dgamma = 0.0
        for x, (h, norm_backprop), m, dy in zip(X, normed, mixed, dY):
            dw += gamma * xp.tensordot(h, dy, axes=([1, 2], [0, 1]))
            dgamma += float((dy * m).sum())
            # cast: thinc's array stubs have no indexing by None (new axes)
            dh = gamma * cast(Any, w)[:, None, None] * cast(Any, dy)[None]
            dx = xp.zeros_like(x)
            dx[layers] = norm_backprop(dh) if norm_backprop else dh
            dX.append(dx)
        if model.attrs["trainable"]:
            ds = w * (dw - (w * dw).sum()) + model.attrs["weight_l2"] * s
            model.inc_grad("s", ds.astype("float32"))
        if model.attrs["trainable_gamma"]:
            model.inc_grad("gamma", model.ops.asarray1f([dgamma]))
        return dX

    return Y, backprop


def _dropout_mask(model: Model, n: int):
    rate = model.attrs["weight_dropout"]
    if not rate:
        return None
    xp = model.ops.xp
    keep = xp.random.uniform(size=n) >= rate
    if not keep.any():
        keep[xp.random.randint(n)] = True
    return keep


def ConcatLayers(layers: Optional[List[int]] = None) -> Model[List[Floats3d], List[Floats2d]]:
    """Concatenate the chosen ELMo layers (``None``: all): output width ``len(layers) * width``."""
    return Model(
        "concat_layers",
        concat_forward,
        init=concat_init,
        dims={"nI": None, "nO": None},
        attrs={"layers": check_layers(layers, "ConcatLayers")},
    )


def concat_init(model: Model, X: Optional[List[Floats3d]] = None, Y=None) -> None:
    layers = _init_dims(model, X)
    model.set_dim("nO", len(layers) * model.get_dim("nI"), force=True)


def concat_forward(model: Model, X: List[Floats3d], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    xp = model.ops.xp
    layers = model.attrs["resolved_layers"]
    Y = [xp.ascontiguousarray(x[layers].transpose(1, 0, 2).reshape(x.shape[1], -1)) for x in X]

    def backprop(dY: List[Floats2d]) -> List[Floats3d]:
        dX = []
        for x, dy in zip(X, dY):
            dx = xp.zeros_like(x)
            # cast: thinc's array stubs take reshape's and transpose's axes only as one tuple
            dx[layers] = cast(Any, dy).reshape(x.shape[1], len(layers), -1).transpose(1, 0, 2)
            dX.append(dx)
        return dX

    return Y, backprop


def PaperScheme(name: str) -> Model[List[Floats3d], List[Floats2d]]:
    """One of the seven schemes of Table 1 of arXiv 1904.02954, by name.

    name: ``layer1``, ``layer2``, ``layer3`` (a single layer; our indices 0, 1, 2), ``concat`` (all
    three layers concatenated), ``average`` (fixed average of the three), ``weighted`` (Peters et
    al.: learned softmax weights and gamma over all three), ``weighted12`` (learned weighted average
    of the 1st and 2nd layer only: the top LSTM is never computed).
    """
    if name not in PAPER_SCHEMES:
        raise ElmoConfigError(f"Unknown paper scheme {name!r}; choose one of {', '.join(PAPER_SCHEMES)}")
    settings = PAPER_SCHEMES[name]
    return ConcatLayers([0, 1, 2]) if settings is None else ScalarMix(**settings)
