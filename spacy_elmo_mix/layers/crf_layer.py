"""The thinc side of the CRF (``tagging.crf.LinearChainCRF``): a layer that holds its transition
scores, and the two things a pipeline component does with it: the loss of gold tags with the
gradient of the emissions (``crf_loss``), and Viterbi decoding (``crf_decode``).

Emissions come as one [n_tokens, n_tags] array per doc; docs without tokens are skipped. The CRF's
constraints follow the tag scheme given at initialize (``tagging.tag_schemes``) and are saved with it.
"""

from __future__ import annotations

import warnings
from typing import List, Optional, Sequence, Tuple, cast

import numpy as np
import torch
from thinc.api import Model, torch2xp, xp2torch
from thinc.types import Floats2d, Floats3d, Ints1d, Ints2d

from ..errors import ElmoFileError
from ..tagging.crf import UNKNOWN, LinearChainCRF
from ..tagging.tag_schemes import allowed_transitions
from .torch_layer import TorchLayer, torch_module


def CRFLayer() -> Model:
    """A CRF over ``nO`` tags; ``initialize(Y=(tags, scheme))`` sets the tags and constraints."""
    return TorchLayer(
        "crf", lambda layer: LinearChainCRF(layer.get_dim("nO")), {"nO": None}, _init, forward=_no_forward
    )


def _no_forward(model: Model, X, is_train: bool):
    raise NotImplementedError("the crf layer is used through crf_loss and crf_decode")


def _init(model: Model, X=None, Y: Optional[Tuple[Sequence[str], str]] = None) -> None:
    if Y is None:
        return
    tags, scheme = Y
    if model.has_dim("nO") is True and model.get_dim("nO") != len(tags):
        model.shims.clear()  # new labels: a new CRF
        model.set_dim("nO", len(tags), force=True)
    else:
        model.set_dim("nO", len(tags))
    crf = torch_module(model)
    for buffer, allowed in zip(
        (crf.allowed_start, crf.allowed_transitions, crf.allowed_end), allowed_transitions(tags, scheme)
    ):
        buffer.copy_(torch.as_tensor(allowed))


def check_loaded(model: Model, tags: Sequence[str], scheme: str, where: str) -> None:
    """After loading: the CRF layer fits ``tags`` (its size and its parameters' shapes), its scores
    are finite, and its constraints are the ones ``scheme`` derives for ``tags`` (set here, whatever
    the loaded bytes held). ElmoFileError naming ``where`` otherwise. An unsized layer (saved before
    ``initialize``) is left as it is."""
    if model.has_dim("nO") is not True or not model.shims:
        return
    crf = torch_module(model)
    n = len(tags)
    if model.get_dim("nO") != n or crf.n_tags != n:
        raise ElmoFileError(f"{where}: the CRF has {model.get_dim('nO')} tags, its labels give {n} ({', '.join(tags)})")
    for name, shape in (("transitions", (n, n)), ("start", (n,)), ("end", (n,))):
        value = getattr(crf, name).detach()
        if tuple(value.shape) != shape:
            raise ElmoFileError(f"{where}: the CRF's {name} are {list(value.shape)}, {list(shape)} expected")
        if not bool(torch.isfinite(value).all()):
            raise ElmoFileError(f"{where}: the CRF's {name} scores are not all finite (a damaged file)")
    _init(model, Y=(tags, scheme))


def _padded(
    model: Model, emissions: List[Floats2d], requires_grad: bool
) -> Tuple[torch.Tensor, torch.Tensor, List[int]]:
    """The non-empty docs' emissions as a padded tensor, their lengths, and their indices."""
    rows = [i for i, e in enumerate(emissions) if len(e)]
    lengths = [len(emissions[i]) for i in rows]
    padded = model.ops.alloc3f(len(rows), max(lengths, default=1), model.get_dim("nO"))
    for j, i in enumerate(rows):
        padded[j, : lengths[j]] = emissions[i]
    return xp2torch(padded, requires_grad=requires_grad), torch.tensor(lengths), rows


def _padded_mask(
    allowed: Optional[List[Optional[np.ndarray]]], rows: List[int], lengths: torch.Tensor, scores: torch.Tensor
) -> Optional[torch.Tensor]:
    """The docs' ``allowed`` tags ([n_tokens, n_tags] booleans, None: all) laid out as ``scores``
    (the padded batch of :func:`_padded`, on its device), or None where no doc has any."""
    if allowed is None or all(allowed[i] is None for i in rows):
        return None
    mask = torch.ones(scores.shape, dtype=torch.bool)
    for j, i in enumerate(rows):
        if allowed[i] is not None:
            mask[j, : lengths[j]] = torch.from_numpy(np.asarray(allowed[i], dtype=bool))
    return mask.to(scores.device)


def crf_decode(
    model: Model, emissions: List[Floats2d], allowed: Optional[List[Optional[np.ndarray]]] = None
) -> List[Ints1d]:
    """The best valid tag sequence of each doc (an empty array for a doc without tokens).

    allowed: per doc, None or a boolean [n_tokens, n_tags] array of the tags each token may take
    (the decoded sequence is the best valid one among those; there must be one)."""
    paths = [model.ops.alloc1i(0) for _ in emissions]
    scores, lengths, rows = _padded(model, emissions, requires_grad=False)
    mask = _padded_mask(allowed, rows, lengths, scores)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    if rows:
        with torch.no_grad():
            best, _ = torch_module(model).decode(scores, lengths.to(scores.device))
        best = cast(Ints2d, model.ops.asarray(torch2xp(best)))  # [B, L]
        for j, i in enumerate(rows):
            paths[i] = cast(Ints1d, best[j, : lengths[j]].astype("int32"))  # thinc's astype stub: no Ints1d
    return paths


def crf_loss(
    model: Model, emissions: List[Floats2d], gold: List[Ints1d], allowed: Optional[List[Optional[np.ndarray]]] = None
) -> Tuple[float, List[Floats2d]]:
    """The mean negative log-likelihood over the docs of their ``gold`` tag indices (-1 = unknown)
    and its gradient with respect to the emissions; the CRF's own gradients are accumulated for
    the next ``finish_update``. A doc whose known tags no valid sequence matches is left out.

    allowed: per doc, None or a boolean [n_tokens, n_tags] array of the tags an unknown token may
    take (False: known to be wrong, e.g. spans marked incorrect)."""
    d_emissions = [model.ops.alloc2f(*e.shape) for e in emissions]
    scores, lengths, rows = _padded(model, emissions, requires_grad=True)
    if not rows:
        return 0.0, d_emissions
    tags = torch.full(scores.shape[:2], UNKNOWN, dtype=torch.long)
    for j, i in enumerate(rows):
        tags[j, : lengths[j]] = torch.as_tensor(model.ops.to_numpy(gold[i]), dtype=torch.long)
    device = scores.device
    mask = _padded_mask(allowed, rows, lengths, scores)
    nll = torch_module(model).nll(scores, tags.to(device), lengths.to(device), mask)
    if bool(torch.isnan(nll).any()):
        raise ValueError("the CRF's loss is not a number: emissions too large for float32 sums")
    # +inf: no valid sequence matches the known tags (misaligned tokens); such docs teach nothing.
    left_out = int((~torch.isfinite(nll)).sum())
    if left_out:
        warnings.warn(
            f"{left_out} of {len(rows)} sentences left out of the CRF's loss: no valid tag sequence "
            "matches their known gold tags (misaligned tokens, or spans marked incorrect that the gold has)",
            stacklevel=2,
        )
    loss = nll[torch.isfinite(nll)].sum() / len(emissions)
    loss.backward()
    assert scores.grad is not None  # scores requires grad and the loss was backpropagated
    grad = cast(Floats3d, torch2xp(scores.grad))  # [B, L, T]
    for j, i in enumerate(rows):
        d_emissions[i] = grad[j, : lengths[j]]
    return float(loss.item()), d_emissions
