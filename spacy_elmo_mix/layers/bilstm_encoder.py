"""The thinc wrapper of the paper's BiLSTM (``tagging.bilstm.BiLSTMStack``): per-doc token vectors
in, per-doc contextual vectors of width ``2 * width`` out; the input width is read at initialize.
The docs' vectors enter the stack as one array of all tokens, and leave it as views of one."""

from __future__ import annotations

from typing import Callable, List, Optional, Tuple, cast

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
        "bilstm", build, {"nI": None, "nO": 2 * width}, _init, convert_inputs=_flatten, convert_outputs=_split_outputs
    )


def _init(model: Model, X: Optional[List[Floats2d]] = None, Y=None) -> None:
    if X:
        model.set_dim("nI", X[0].shape[1])


def _flatten(model: Model, Xs: List[Floats2d], is_train: bool) -> Tuple[ArgsKwargs, Callable]:
    """Docs' vectors -> one [n_tokens, D] tensor (the docs one after another) and the lengths."""
    lengths = [len(x) for x in Xs]
    flat = model.ops.xp.concatenate(Xs) if Xs else model.ops.alloc2f(0, model.get_dim("nI"))
    inputs = ArgsKwargs(args=(xp2torch(flat, requires_grad=is_train), torch.tensor(lengths)), kwargs={})

    def get_dX(d_inputs: ArgsKwargs) -> List[Floats2d]:
        return _split(model, cast(Floats2d, torch2xp(d_inputs.args[0])), lengths)

    return inputs, get_dX


def _split_outputs(model: Model, X_Y, is_train: bool) -> Tuple[List[Floats2d], Callable]:
    Xs, Y = X_Y
    Ys = _split(model, cast(Floats2d, torch2xp(Y)), [len(x) for x in Xs])

    def get_dY(dYs: List[Floats2d]) -> ArgsKwargs:
        grad = model.ops.xp.concatenate(dYs) if dYs else model.ops.alloc2f(0, Y.shape[1])
        return ArgsKwargs(args=(Y,), kwargs={"grad_tensors": xp2torch(grad)})

    return Ys, get_dY


def _split(model: Model, flat: Floats2d, lengths: List[int]) -> List[Floats2d]:
    """One [n_tokens, D] array -> a view per doc."""
    ends = model.ops.xp.cumsum(lengths).tolist()
    return [flat[end - n : end] for n, end in zip(lengths, ends)]
