"""A linear-chain conditional random field in plain torch: batched, masked, constrained.

Scores of a tag sequence ``y`` of a sentence of length ``n`` with emissions ``e`` ([n, T])::

    score(y) = start[y_0] + sum_t e[t, y_t] + sum_{t>0} transitions[y_{t-1}, y_t] + end[y_{n-1}]

``log_partition`` is the log-sum-exp of ``score`` over all tag sequences (the forward algorithm),
``decode`` the highest-scoring sequence (Viterbi). Both run on a padded batch ([B, L, T] with the
sentence lengths), one vectorized step per position: there is no Python loop over sentences or tags.

Constraints: a transition, start or end that is not allowed scores ``-inf`` in every computation
(likelihood and decoding alike), so no sequence with a forbidden transition has probability mass and
every decoded sequence is valid by construction (``tag_schemes.allowed_transitions`` derives them
from BIO or BILOU tags). Gold tags ``-1`` mean "unknown": the likelihood then sums over every tag at
that position (a partially annotated sentence).
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor, nn

UNKNOWN = -1


class LinearChainCRF(nn.Module):
    """Transition, start and end scores over ``n_tags`` tags, with optional constraints.

    n_tags: the number of tags T.
    allowed: ``(start, transitions, end)`` boolean tensors of shape [T], [T, T] (from row tag to
        column tag) and [T]; False forbids. None: everything allowed.
    """

    def __init__(self, n_tags: int, allowed: Optional[Tuple[Tensor, Tensor, Tensor]] = None) -> None:
        super().__init__()
        if n_tags < 1:
            raise ValueError(f"a CRF needs at least one tag, got n_tags={n_tags}")
        self.n_tags = n_tags
        self.transitions = nn.Parameter(torch.zeros(n_tags, n_tags))
        self.start = nn.Parameter(torch.zeros(n_tags))
        self.end = nn.Parameter(torch.zeros(n_tags))
        if allowed is None:
            allowed = (torch.ones(n_tags, dtype=torch.bool), torch.ones(n_tags, n_tags, dtype=torch.bool), torch.ones(n_tags, dtype=torch.bool))
        start, trans, end = (torch.as_tensor(a, dtype=torch.bool) for a in allowed)
        if start.shape != (n_tags,) or trans.shape != (n_tags, n_tags) or end.shape != (n_tags,):
            raise ValueError(f"allowed: shapes [{n_tags}], [{n_tags}, {n_tags}], [{n_tags}] expected, got {tuple(start.shape)}, {tuple(trans.shape)}, {tuple(end.shape)}")
        # Buffers: they move with the module and are saved with it, but are not learned.
        self.register_buffer("allowed_start", start)
        self.register_buffer("allowed_transitions", trans)
        self.register_buffer("allowed_end", end)

    def constrained(self) -> Tuple[Tensor, Tensor, Tensor]:
        """Start, transition and end scores with the forbidden ones at ``-inf``."""
        return (
            self.start.masked_fill(~self.allowed_start, float("-inf")),
            self.transitions.masked_fill(~self.allowed_transitions, float("-inf")),
            self.end.masked_fill(~self.allowed_end, float("-inf")),
        )

    def log_partition(self, emissions: Tensor, lengths: Tensor) -> Tensor:
        """log Z of each sentence: [B]. emissions: [B, L, T]; lengths: [B], each in 1..L."""
        mask = _check(emissions, lengths, self.n_tags)
        start, trans, end = self.constrained()
        alpha = start + emissions[:, 0]
        for t in range(1, emissions.shape[1]):
            step = _logsumexp(alpha.unsqueeze(2) + trans, dim=1) + emissions[:, t]
            alpha = torch.where(mask[:, t : t + 1], step, alpha)
        return _logsumexp(alpha + end, dim=1)

    def path_score(self, emissions: Tensor, tags: Tensor, lengths: Tensor) -> Tensor:
        """score(y) of each sentence's ``tags`` ([B, L], all known): [B]."""
        mask = _check(emissions, lengths, self.n_tags)
        start, trans, end = self.constrained()
        tags = tags.masked_fill(~mask, 0)
        emitted = emissions.gather(2, tags.unsqueeze(2)).squeeze(2)
        # where, not a product with the mask: padded emissions may be -inf or NaN (0 * inf = NaN).
        total = start[tags[:, 0]] + torch.where(mask, emitted, torch.zeros_like(emitted)).sum(1)
        if tags.shape[1] > 1:
            moves = trans[tags[:, :-1], tags[:, 1:]]
            total = total + torch.where(mask[:, 1:], moves, torch.zeros_like(moves)).sum(1)
        last = tags.gather(1, (lengths - 1).unsqueeze(1)).squeeze(1)
        return total + end[last]

    def nll(self, emissions: Tensor, tags: Tensor, lengths: Tensor) -> Tensor:
        """Negative log-likelihood of each sentence's ``tags`` ([B, L]; -1 = unknown): [B].

        With unknown tags the numerator is the log-partition restricted to the known ones.
        """
        mask = _check(emissions, lengths, self.n_tags)
        if bool(((tags == UNKNOWN) & mask).any()):
            known = tags.clamp(min=0).unsqueeze(2) == torch.arange(self.n_tags, device=tags.device)
            free = (tags == UNKNOWN).unsqueeze(2) | known
            numerator = self.log_partition(emissions.masked_fill(~free, float("-inf")), lengths)
        else:
            numerator = self.path_score(emissions, tags, lengths)
        return self.log_partition(emissions, lengths) - numerator

    def decode(self, emissions: Tensor, lengths: Tensor) -> Tuple[Tensor, Tensor]:
        """Viterbi: the best tag sequence of each sentence ([B, L], positions past a sentence's
        length repeat its last tag) and its score ([B])."""
        mask = _check(emissions, lengths, self.n_tags)
        start, trans, end = self.constrained()
        batch, length, n_tags = emissions.shape
        delta = start + emissions[:, 0]
        keep = torch.arange(n_tags, device=emissions.device).expand(batch, n_tags)
        pointers = []
        for t in range(1, length):
            best, arg = (delta.unsqueeze(2) + trans).max(dim=1)
            live = mask[:, t : t + 1]
            delta = torch.where(live, best + emissions[:, t], delta)
            pointers.append(torch.where(live, arg, keep))
        score, tag = (delta + end).max(dim=1)
        path = [tag]
        for arg in reversed(pointers):
            tag = arg.gather(1, tag.unsqueeze(1)).squeeze(1)
            path.append(tag)
        path.reverse()
        return torch.stack(path, dim=1), score


def _logsumexp(x: Tensor, dim: int) -> Tensor:
    """``torch.logsumexp`` whose gradient is 0 instead of NaN where every term is ``-inf``.

    Such all-forbidden sums occur under constraints (e.g. ``I-LOC`` after a known ``B-PER``); their
    result, ``-inf``, is exact, and it contributes nothing downstream, so neither may its gradient.
    """
    top = x.detach().amax(dim=dim, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    total = torch.exp(x - top).sum(dim=dim)
    some = total > 0
    return torch.where(some, torch.log(torch.where(some, total, torch.ones_like(total))), torch.full_like(total, float("-inf"))) + top.squeeze(dim)


def _check(emissions: Tensor, lengths: Tensor, n_tags: int) -> Tensor:
    """The [B, L] mask of real positions; ValueError on shapes or lengths out of 1..L."""
    if emissions.dim() != 3 or emissions.shape[2] != n_tags or emissions.shape[1] < 1:
        raise ValueError(f"emissions must be [batch, length >= 1, {n_tags}], got {tuple(emissions.shape)}")
    if lengths.shape != emissions.shape[:1]:
        raise ValueError(f"lengths must be [{emissions.shape[0]}], got {tuple(lengths.shape)}")
    if bool((lengths < 1).any()) or bool((lengths > emissions.shape[1]).any()):
        raise ValueError(f"every length must be in 1..{emissions.shape[1]}, got {lengths.tolist()}")
    return torch.arange(emissions.shape[1], device=emissions.device) < lengths.unsqueeze(1)
