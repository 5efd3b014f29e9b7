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

from typing import List, Optional, Tuple

import numpy as np
import torch
from torch import Tensor, nn

UNKNOWN = -1


class LinearChainCRF(nn.Module):
    """Transition, start and end scores over ``n_tags`` tags, with optional constraints.

    n_tags: the number of tags T.
    allowed: ``(start, transitions, end)`` boolean tensors of shape [T], [T, T] (from row tag to
        column tag) and [T]; False forbids. None: everything allowed.
    """

    # buffers (register_buffer), declared for the type checker
    allowed_start: Tensor
    allowed_transitions: Tensor
    allowed_end: Tensor

    def __init__(self, n_tags: int, allowed: Optional[Tuple[Tensor, Tensor, Tensor]] = None) -> None:
        super().__init__()
        if n_tags < 1:
            raise ValueError(f"a CRF needs at least one tag, got n_tags={n_tags}")
        self.n_tags = n_tags
        self.transitions = nn.Parameter(torch.zeros(n_tags, n_tags))
        self.start = nn.Parameter(torch.zeros(n_tags))
        self.end = nn.Parameter(torch.zeros(n_tags))
        if allowed is None:
            allowed = (
                torch.ones(n_tags, dtype=torch.bool),
                torch.ones(n_tags, n_tags, dtype=torch.bool),
                torch.ones(n_tags, dtype=torch.bool),
            )
        start, trans, end = (torch.as_tensor(a, dtype=torch.bool) for a in allowed)
        if start.shape != (n_tags,) or trans.shape != (n_tags, n_tags) or end.shape != (n_tags,):
            raise ValueError(
                f"allowed: shapes [{n_tags}], [{n_tags}, {n_tags}], [{n_tags}] expected, got {tuple(start.shape)}, {tuple(trans.shape)}, {tuple(end.shape)}"
            )
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
        _check(emissions, lengths, self.n_tags)
        # torch's log-sum-exp when no sum can be all -inf: every tag follows some allowed start
        # (then some tag at every position) and some end is allowed; the NaN-free one otherwise
        reachable = (self.allowed_start.unsqueeze(1) & self.allowed_transitions).any(0).all() & self.allowed_end.any()
        return self._log_sum(emissions, lengths, torch.logsumexp if bool(reachable) else _logsumexp)

    def _log_sum(self, emissions: Tensor, lengths: Tensor, logsumexp) -> Tensor:
        """log of the sum over tag sequences of exp(score) (-inf emissions allowed): on the CPU by
        :class:`ScaledForwardBackward` where its scaled sums stay in range, else by the
        log-domain forward algorithm (``logsumexp``: the function that one uses)."""
        if emissions.device.type == "cpu" and emissions.dtype in (torch.float32, torch.float64):
            fast = ScaledForwardBackward.log_sum(emissions, lengths, *self.constrained())
            if fast is not None:
                return fast
            # the extremes it declined: in float64, where sums of float32 scores cannot overflow
            return self._forward(emissions.double(), lengths, logsumexp).to(emissions.dtype)
        return self._forward(emissions, lengths, logsumexp)

    def _forward(self, emissions: Tensor, lengths: Tensor, logsumexp) -> Tensor:
        """The forward algorithm, unmasked over the padded batch: each sentence's sum is read at its
        own last position (later positions only extend paths nobody reads)."""
        start, trans, end = (x.to(emissions.dtype) for x in self.constrained())
        # Padding zeroed: the unread paths must stay finite, or -inf/NaN padding turns their zero
        # gradients into NaN (0 * inf) on the way back into the read positions.
        past = torch.arange(emissions.shape[1], device=emissions.device) >= lengths.to(emissions.device).unsqueeze(1)
        steps = emissions.masked_fill(past.unsqueeze(2), 0.0).unbind(1)
        alpha = start + steps[0]
        alphas = [alpha]
        for emitted in steps[1:]:
            alpha = logsumexp(alpha.unsqueeze(2) + trans, 1) + emitted
            alphas.append(alpha)
        rows = torch.arange(emissions.shape[0], device=emissions.device)
        return logsumexp(torch.stack(alphas)[lengths.to(emissions.device) - 1, rows] + end, 1)

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

    def nll(self, emissions: Tensor, tags: Tensor, lengths: Tensor, allowed: Optional[Tensor] = None) -> Tensor:
        """Negative log-likelihood of each sentence's ``tags`` ([B, L]; -1 = unknown): [B].

        With unknown tags the numerator is the log-partition restricted to the known ones.
        allowed: optionally, a boolean [B, L, T] mask of the tags an unknown position may take
        (False: known to be wrong there); the numerator is then restricted to it, too.
        """
        mask = _check(emissions, lengths, self.n_tags, finite=True)
        self._check_parameters()
        if tags.shape != mask.shape:
            raise ValueError(f"tags must be [{mask.shape[0]}, {mask.shape[1]}], got {tuple(tags.shape)}")
        bad = mask & ((tags < UNKNOWN) | (tags >= self.n_tags))
        if bool(bad.any()):
            b, t = (int(i) for i in bad.nonzero()[0])
            raise ValueError(
                f"tag index {int(tags[b, t])} at sentence {b}, position {t}: tags are -1 (unknown) or 0..{self.n_tags - 1}"
            )
        if allowed is not None and allowed.shape != emissions.shape:
            raise ValueError(f"allowed must be {tuple(emissions.shape)}, got {tuple(allowed.shape)}")
        if bool(((tags == UNKNOWN) & mask).any()) or allowed is not None:
            known = tags.clamp(min=0).unsqueeze(2) == torch.arange(self.n_tags, device=tags.device)
            free = (tags == UNKNOWN).unsqueeze(2) | known
            if allowed is not None:
                free = free & allowed
            # sums where every term is forbidden occur here: the NaN-free log-sum-exp
            numerator = self._log_sum(emissions.masked_fill(~free, float("-inf")), lengths, _logsumexp)
        else:
            numerator = self.path_score(emissions, tags, lengths)
        return self.log_partition(emissions, lengths) - numerator

    @torch.no_grad()
    def decode(self, emissions: Tensor, lengths: Tensor) -> Tuple[Tensor, Tensor]:
        """Viterbi: the best tag sequence of each sentence ([B, L], positions past a sentence's
        length repeat its last tag) and its score ([B]).

        Packed like an RNN over sorted lengths: the sentences run longest first, and step ``t``
        works on the ``n_t`` sentences still longer than ``t`` only, so a finished sentence's scores
        stay as they were at its last position and the batch does no work on padding. It runs in
        numpy on the host (one copy of the emissions there, one of the paths back): a step's
        arrays are small ([n_t, T, T]), so the cost is per-operation overhead, a fraction of
        torch's. The sums are float64, so finite float32 scores cannot overflow into ``inf - inf``
        and every decoded path keeps to the constraints.
        """
        _check(emissions, lengths, self.n_tags, finite=True)
        self._check_parameters()
        start, trans, end = (x.detach().cpu().double().numpy() for x in self.constrained())
        order, counts = _by_length(lengths.cpu().numpy())
        steps = np.ascontiguousarray(emissions.detach().cpu().double().numpy()[order].transpose(1, 0, 2))
        delta = start + steps[0]
        pointers = []
        for t, n in enumerate(counts[1:], start=1):
            scores = delta[:n, :, None] + trans
            pointers.append(scores.argmax(1))
            np.add(scores.max(1), steps[t][:n], out=delta[:n])  # the finished rows keep their scores
        final = delta + end
        tag = final.argmax(1)
        unsort = np.empty_like(order)
        unsort[order] = np.arange(len(order))
        path = _backtrack(pointers, tag, emissions.shape[1])[unsort]
        score = final[np.arange(len(tag)), tag][unsort]
        if not np.isfinite(score).all():
            b = int(np.flatnonzero(~np.isfinite(score))[0])
            raise ValueError(f"sentence {b} has no valid tag sequence under the constraints and the -inf emissions")
        return torch.from_numpy(path).to(emissions.device), torch.from_numpy(score).to(emissions.dtype).to(
            emissions.device
        )

    def _check_parameters(self) -> None:
        """ValueError where a transition, start or end score is NaN or +inf (-inf: forbidden)."""
        for name in ("transitions", "start", "end"):
            value = getattr(self, name).detach()
            if bool(torch.isnan(value).any()) or bool((value == float("inf")).any()):
                raise ValueError(
                    f"the CRF's {name} scores are not finite (NaN or +inf): a damaged model or diverged training"
                )


class ScaledForwardBackward(torch.autograd.Function):
    """log Z of a padded batch and its gradient by the scaled forward-backward algorithm (Rabiner
    1989) in float64 numpy, for the CPU: per step one ``[n_t, T] x [T, T]`` product and two
    whole-array operations on the ``n_t`` sentences still running (sorted by length, as
    :meth:`LinearChainCRF.decode`), where the log-domain loop in torch costs a log-sum-exp and its
    autograd graph per step. The gradients are the marginals, computed once after one backward
    sweep: ``dlogZ/de[t, j] = P(y_t = j)``, ``dlogZ/dtransitions[i, j] = sum_t P(y_{t-1} = i, y_t = j)``,
    ``dlogZ/dstart = P(y_0)``, ``dlogZ/dend = P(y_{n-1})``.

    Every factor is an ``exp`` of a score minus its maximum (so at most 1; forbidden scores give 0)
    and every step's sum is divided out and its log accumulated, so nothing overflows; float64 keeps
    sums of up to ~700 nats below the step's maximum exact. Where a step's sum still falls below
    :data:`SMALLEST` (a sentence without a valid sequence, non-finite scores, or hostile extremes),
    :meth:`log_sum` returns None and the caller runs the log-domain algorithm instead.
    """

    SMALLEST = 1e-280

    @staticmethod
    def log_sum(emissions: Tensor, lengths: Tensor, start: Tensor, trans: Tensor, end: Tensor) -> Optional[Tensor]:
        """log Z of each sentence ([B]) with its gradient attached, or None (see the class)."""
        state = _ScaledSums.compute(emissions, lengths, start, trans, end)
        if state is None:
            return None
        return ScaledForwardBackward.apply(emissions, start, trans, end, state)

    @staticmethod
    def forward(ctx, emissions: Tensor, start: Tensor, trans: Tensor, end: Tensor, state: "_ScaledSums") -> Tensor:
        ctx.state = state
        return torch.from_numpy(state.log_z).to(emissions.dtype)

    @staticmethod
    def backward(ctx, d_log_z: Tensor) -> Tuple:
        d_emissions, d_start, d_trans, d_end = ctx.state.marginals(d_log_z.detach().cpu().numpy().astype(np.float64))
        dtype = d_log_z.dtype
        grads = [torch.from_numpy(g).to(dtype) for g in (d_emissions, d_start, d_trans, d_end)]
        return (*grads, None)


class _ScaledSums:
    """The forward sweep of :class:`ScaledForwardBackward`: scaled alphas, step sums and factors,
    in the sorted, step-major layout ``[L, B, T]`` (row ``b`` of step ``t`` is the ``b``-th longest
    sentence; rows past a sentence's end stay zero)."""

    def __init__(self, order, counts, sizes, phi, alpha, sums, final, factors) -> None:
        self.order, self.counts, self.sizes = order, counts, sizes
        self.phi, self.alpha, self.sums, self.final = phi, alpha, sums, final
        self.a_start, self.a_trans, self.a_end = factors
        self.log_z: np.ndarray = np.empty(0)

    @classmethod
    def compute(cls, emissions: Tensor, lengths: Tensor, start: Tensor, trans: Tensor, end: Tensor):
        sizes_all = lengths.cpu().numpy()
        order, counts = _by_length(sizes_all)
        sizes = sizes_all[order]
        scores = emissions.detach().numpy().astype(np.float64)[order].transpose(1, 0, 2)  # [L, B, T]
        steps = (np.arange(scores.shape[0])[:, None] < sizes[None, :])[:, :, None]  # real positions
        scores = np.where(steps, scores, 0.0)
        tops = scores.max(2, keepdims=True)
        if not np.isfinite(tops).all():
            return None  # a position where no tag is possible, or a non-finite emission
        phi = np.exp(scores - tops) * steps
        offsets, factors = [], []
        for x in (start, trans, end):
            values = x.detach().numpy().astype(np.float64)
            top = values.max()
            if np.isnan(top) or top == np.inf:
                return None
            top = top if np.isfinite(top) else 0.0  # all forbidden: the sums are 0, caught below
            offsets.append(top)
            factors.append(np.exp(values - top))
        a_start, a_trans, a_end = factors
        alpha = np.zeros_like(phi)
        sums = np.ones(steps.shape[:2])
        with np.errstate(divide="ignore", invalid="ignore"):  # a zero sum is caught below
            first = a_start * phi[0]
            sums[0] = first.sum(1)
            alpha[0] = first / sums[0][:, None]
            for t, n in enumerate(counts[1:], start=1):
                step = (alpha[t - 1, :n] @ a_trans) * phi[t, :n]
                sums[t, :n] = step.sum(1)
                np.divide(step, sums[t, :n, None], out=alpha[t, :n])
        rows = np.arange(len(sizes))
        final = (alpha[sizes - 1, rows] * a_end).sum(1)
        smallest = ScaledForwardBackward.SMALLEST
        if not (sums >= smallest).all() or not (final >= smallest).all():
            return None
        state = cls(order, counts, sizes, phi, alpha, sums, final, factors)
        offset = tops[:, :, 0].sum(0) + offsets[0] + offsets[2] + (sizes - 1) * offsets[1]
        log_z = np.log(sums).sum(0) + np.log(final) + offset
        state.log_z = np.empty_like(log_z)
        state.log_z[order] = log_z
        return state

    def marginals(self, d_log_z: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Gradients of ``sum_b d_log_z[b] * log Z_b`` for the emissions ([B, L, T]), start, transitions
        and end: the backward sweep, then each marginal times its sentence's ``d_log_z``."""
        sizes, alpha, phi, sums = self.sizes, self.alpha, self.phi, self.sums
        rows = np.arange(len(sizes))
        weight = d_log_z[self.order]
        beta = np.zeros_like(alpha)
        beta[sizes - 1, rows] = self.a_end / self.final[:, None]
        for t in range(len(self.counts) - 1, 0, -1):
            n = self.counts[t]
            np.divide((phi[t, :n] * beta[t, :n]) @ self.a_trans.T, sums[t, :n, None], out=beta[t - 1, :n])
        unary = alpha * beta * weight[None, :, None]  # P(y_t = j), zero past each end
        later = phi[1:] * beta[1:] / sums[1:, :, None] * weight[None, :, None]
        d_trans = self.a_trans * (alpha[:-1].reshape(-1, alpha.shape[2]).T @ later.reshape(-1, alpha.shape[2]))
        d_start = unary[0].sum(0)
        d_end = unary[sizes - 1, rows].sum(0)
        d_emissions = np.empty_like(unary.transpose(1, 0, 2))
        d_emissions[self.order] = unary.transpose(1, 0, 2)
        return d_emissions, d_start, d_trans, d_end


def _by_length(sizes: np.ndarray) -> Tuple[np.ndarray, List[int]]:
    """The sentences longest first (a stable ``argsort`` of the lengths ``sizes``, each >= 1) and,
    for each step ``t`` up to the longest length, how many of them are longer than ``t``: in that
    order those are the first ``n_t`` rows."""
    order = np.argsort(-sizes, kind="stable")
    counts = (sizes[order][None, :] > np.arange(int(sizes.max()))[:, None]).sum(1)
    return order, counts.tolist()


def _backtrack(pointers: List[np.ndarray], tag: np.ndarray, length: int) -> np.ndarray:
    """The [B, length] paths that end in ``tag`` ([B]): ``pointers[t - 1]`` ([n_t, T], the first
    ``n_t`` sentences, those longer than ``t``) leads from position ``t`` back to ``t - 1``; a
    sentence's positions after its own last one repeat its final tag, as does the padding."""
    path = np.empty((length, len(tag)), dtype=np.int64)
    current, rows = tag.copy(), np.arange(len(tag))
    path[len(pointers) :] = current
    for t in range(len(pointers), 0, -1):
        back = pointers[t - 1]
        n = len(back)
        current[:n] = back[rows[:n], current[:n]]
        path[t - 1] = current
    return np.ascontiguousarray(path.T)


def _logsumexp(x: Tensor, dim: int) -> Tensor:
    """``torch.logsumexp`` whose gradient is 0 instead of NaN where every term is ``-inf``.

    Such all-forbidden sums occur under constraints (e.g. ``I-LOC`` after a known ``B-PER``); their
    result, ``-inf``, is exact, and it contributes nothing downstream, so neither may its gradient.
    """
    top = x.detach().amax(dim=dim, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    total = torch.exp(x - top).sum(dim=dim)
    some = total > 0
    return torch.where(
        some, torch.log(torch.where(some, total, torch.ones_like(total))), torch.full_like(total, float("-inf"))
    ) + top.squeeze(dim)


def _check(emissions: Tensor, lengths: Tensor, n_tags: int, finite: bool = False) -> Tensor:
    """The [B, L] mask of real positions; ValueError on shapes or lengths out of 1..L, and with
    ``finite`` on a NaN or +inf emission at a real position (-inf, a forbidden tag, is allowed)."""
    if emissions.dim() != 3 or emissions.shape[2] != n_tags or emissions.shape[1] < 1:
        raise ValueError(f"emissions must be [batch, length >= 1, {n_tags}], got {tuple(emissions.shape)}")
    if lengths.shape != emissions.shape[:1]:
        raise ValueError(f"lengths must be [{emissions.shape[0]}], got {tuple(lengths.shape)}")
    if bool((lengths < 1).any()) or bool((lengths > emissions.shape[1]).any()):
        raise ValueError(f"every length must be in 1..{emissions.shape[1]}, got {lengths.tolist()}")
    mask = torch.arange(emissions.shape[1], device=emissions.device) < lengths.unsqueeze(1)
    if finite:
        bad = mask.unsqueeze(2) & (torch.isnan(emissions) | (emissions == float("inf")))
        if bool(bad.any()):
            b, t, _ = (int(i) for i in bad.nonzero()[0])
            raise ValueError(f"emission at sentence {b}, position {t} is not finite (NaN or +inf)")
    return mask
