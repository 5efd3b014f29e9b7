"""The thinc wrapper of the paper's BiLSTM (``tagging.bilstm.BiLSTMStack``): per-doc token vectors
in, per-doc contextual vectors of width ``2 * width`` out; the input width is read at initialize."""

from __future__ import annotations

from typing import Callable, List, Optional, Tuple

import torch
from thinc.api import ArgsKwargs, Model, torch2xp, xp2torch
from thinc.types import Floats2d

from ..tagging.bilstm import BiLSTMStack
from .torch_layer import TorchLayer


def BiLSTMEncoder(
    width: int, depth: int, dropout: float, recurrent_dropout: float
) -> Model[List[Floats2d], List[Floats2d]]:
    """See ``spacy-elmo-mix.BiLSTMTok2Vec.v1`` for the parameters."""
    BiLSTMStack(1, width, depth, dropout, recurrent_dropout)  # check the settings when the config is read

    def build(layer: Model) -> BiLSTMStack:
        return BiLSTMStack(layer.get_dim("nI"), width, depth, dropout, recurrent_dropout)

    return TorchLayer(
        "bilstm", build, {"nI": None, "nO": 2 * width}, _init, convert_inputs=_pad, convert_outputs=_unpad
    )


def _init(model: Model, X: Optional[List[Floats2d]] = None, Y=None) -> None:
    if X:
        model.set_dim("nI", X[0].shape[1])


def _pad(model: Model, Xs: List[Floats2d], is_train: bool) -> Tuple[ArgsKwargs, Callable]:
    """Docs' vectors -> a zero-padded [B, L, D] tensor and the lengths."""
    lengths = [len(x) for x in Xs]
    padded = model.ops.alloc3f(len(Xs), max(lengths, default=0), model.get_dim("nI"))
    for i, x in enumerate(Xs):
        padded[i, : len(x)] = x
    inputs = ArgsKwargs(args=(xp2torch(padded, requires_grad=is_train), torch.tensor(lengths)), kwargs={})

    def get_dX(d_inputs: ArgsKwargs) -> List[Floats2d]:
        grad = torch2xp(d_inputs.args[0])
        return [grad[i, :n] for i, n in enumerate(lengths)]

    return inputs, get_dX


def _unpad(model: Model, X_Y, is_train: bool) -> Tuple[List[Floats2d], Callable]:
    Xs, Y = X_Y
    padded = torch2xp(Y)
    Ys = [padded[i, : len(x)] for i, x in enumerate(Xs)]

    def get_dY(dYs: List[Floats2d]) -> ArgsKwargs:
        grad = model.ops.alloc3f(*padded.shape)
        for i, dy in enumerate(dYs):
            grad[i, : len(dy)] = dy
        return ArgsKwargs(args=(Y,), kwargs={"grad_tensors": xp2torch(grad)})

    return Ys, get_dY
