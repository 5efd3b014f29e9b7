"""LinearChainCRF and the tag schemes: brute force over every tag sequence, gradients, padding, errors.

Every exact check enumerates all ``T ** n`` tag sequences of a sentence (``itertools.product``) in
float64, so the forward algorithm, Viterbi and the partially-annotated likelihood are compared with
their definitions, not with another implementation.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from spacy_elmo_mix.tagging import crf as crf_module
from spacy_elmo_mix.tagging.crf import LinearChainCRF
from spacy_elmo_mix.tagging.tag_schemes import allowed_transitions, spans_to_tags, tag_names, tags_to_spans

F64 = torch.float64
# Values of the CRF's outputs (they require grad through its parameters) are read with float().
pytestmark = pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True:UserWarning")


def _log_domain_only(monkeypatch) -> None:
    monkeypatch.setattr(crf_module.ScaledForwardBackward, "log_sum", staticmethod(lambda *args: None))


@pytest.fixture(autouse=True, params=["scaled", "log-domain"])
def log_z_algorithm(request, monkeypatch):
    """Every test runs with both ways to log Z and its gradient: the CPU's scaled forward-backward
    and the log-domain forward algorithm (the GPU's, and the CPU's fallback for extreme scores)."""
    if request.param == "log-domain":
        _log_domain_only(monkeypatch)
    return request.param


# ---------------------------------------------------------------------------------------------
# Helpers: random CRFs and batches, and the brute-force references
# ---------------------------------------------------------------------------------------------


def _crf(n_tags: int, seed: int, allowed=None, dtype=F64) -> LinearChainCRF:
    """A CRF with random (seeded) transition, start and end scores."""
    gen = torch.Generator().manual_seed(seed)
    crf = LinearChainCRF(n_tags, allowed).to(dtype)
    with torch.no_grad():
        for p in (crf.transitions, crf.start, crf.end):
            p.copy_(torch.randn(p.shape, generator=gen, dtype=F64))
    return crf


def _batch(lengths, n_tags: int, seed: int, dtype=F64, pad_value: float = None):
    """Random emissions [B, max(lengths), T] (padding random too unless ``pad_value``) and lengths."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.tensor(lengths)
    emissions = (2 * torch.randn(len(lengths), int(lengths.max()), n_tags, generator=gen, dtype=F64)).to(dtype)
    if pad_value is not None:
        pad = torch.arange(emissions.shape[1]) >= lengths.unsqueeze(1)
        emissions = emissions.masked_fill(pad.unsqueeze(2), pad_value)
    return emissions, lengths


def _scheme_allowed(scheme: str, labels):
    tags = tag_names(labels, scheme)
    return tags, tuple(torch.from_numpy(a) for a in allowed_transitions(tags, scheme))


def _random_allowed(n_tags: int, rng: np.random.Generator, max_length: int):
    """A random constraint mask (about 35% forbidden) that leaves at least one valid sequence of
    every length 1..max_length."""
    while True:
        start, trans, end = rng.random(n_tags) < 0.65, rng.random((n_tags, n_tags)) < 0.65, rng.random(n_tags) < 0.65
        reach = start.copy()  # tags some valid prefix of the current length ends in
        ok = True
        for _ in range(max_length):
            if not (reach & end).any():
                ok = False
                break
            reach = (reach[:, None] & trans).any(0)
        if ok:
            return tuple(torch.from_numpy(a) for a in (start, trans, end))


def _valid(seq, allowed) -> bool:
    """Whether the tag indices ``seq`` start, move and end only where ``allowed`` (tensors) allows."""
    if allowed is None:
        return True
    start, trans, end = allowed
    return bool(start[seq[0]] and end[seq[-1]] and all(trans[a, b] for a, b in zip(seq, seq[1:])))


def _brute(crf: LinearChainCRF, emissions: torch.Tensor, n: int, known=None):
    """All sequences of one sentence ([n, T] emissions) that are valid under the CRF's constraints
    (forbidden = excluded) and agree with ``known`` (tags, -1 = any): (sequences [N, n], scores [N])."""
    seqs = torch.tensor(list(itertools.product(range(crf.n_tags), repeat=n)), dtype=torch.long)
    keep = crf.allowed_start[seqs[:, 0]] & crf.allowed_end[seqs[:, -1]]
    if n > 1:
        keep &= crf.allowed_transitions[seqs[:, :-1], seqs[:, 1:]].all(1)
    if known is not None:
        known = torch.as_tensor(known)
        keep &= ((known < 0) | (seqs == known)).all(1)
    seqs = seqs[keep]
    e, tr, st, en = (x.detach().to(F64) for x in (emissions, crf.transitions, crf.start, crf.end))
    scores = st[seqs[:, 0]] + e[torch.arange(n), seqs].sum(1) + en[seqs[:, -1]]
    if n > 1:
        scores = scores + tr[seqs[:, :-1], seqs[:, 1:]].sum(1)
    return seqs, scores


def _logsumexp(scores: torch.Tensor) -> float:
    return float(torch.logsumexp(scores, 0)) if len(scores) else -math.inf


def _cases():
    """(seed, n_tags, lengths) of random unconstrained cases: mixed lengths, padding, T up to 5."""
    return [
        (0, 1, [3, 1]),
        (1, 2, [5, 2, 4]),
        (2, 3, [1]),
        (3, 3, [4, 5, 1, 3]),
        (4, 4, [2, 5, 3]),
        (5, 5, [5, 1, 4]),
        (6, 5, [3, 3]),
        (7, 4, [1, 1, 2]),
    ]


def _constrained_cases():
    """(name, tag names or None, allowed, lengths): BIO and BILOU over 1-2 labels, random masks."""
    cases = []
    for scheme, labels in [("BIO", ["PER"]), ("BIO", ["PER", "LOC"]), ("BILOU", ["PER"]), ("BILOU", ["PER", "LOC"])]:
        tags, allowed = _scheme_allowed(scheme, labels)
        # BILOU over 2 labels has 9 tags: 9**5 = 59,049 sequences at length 5, still quick.
        cases.append((f"{scheme}-{len(labels)}", (scheme, tags), allowed, [5, 1, 3, 4, 2]))
    rng = np.random.default_rng(11)
    for i, n_tags in enumerate([2, 3, 4, 5, 5]):
        cases.append((f"random-{i}-{n_tags}", None, _random_allowed(n_tags, rng, 5), [5, 2, 4, 1]))
    return cases


# ---------------------------------------------------------------------------------------------
# Brute force: log Z, Viterbi, nll (unconstrained and constrained)
# ---------------------------------------------------------------------------------------------


_NLL_CASES = [c for c in _constrained_cases() if c[1]] + [("free-4", None, None, [5, 3, 1])]


@pytest.mark.parametrize("seed,n_tags,lengths", _cases())
def test_log_partition_and_decode_match_brute_force(seed, n_tags, lengths):
    crf = _crf(n_tags, seed)
    emissions, lengths_t = _batch(lengths, n_tags, seed + 100)
    log_z = crf.log_partition(emissions, lengths_t)
    paths, scores = crf.decode(emissions, lengths_t)
    assert log_z.dtype == F64 and paths.shape == emissions.shape[:2]
    for b, n in enumerate(lengths):
        seqs, brute = _brute(crf, emissions[b, :n], n)
        assert len(seqs) == n_tags**n
        assert float(log_z[b]) == pytest.approx(_logsumexp(brute), rel=1e-12, abs=1e-12)
        best = int(brute.argmax())
        assert paths[b, :n].tolist() == seqs[best].tolist()
        assert float(scores[b]) == pytest.approx(float(brute[best]), rel=1e-12, abs=1e-12)
        # Past its length a decoded path repeats its last tag (documented).
        assert (paths[b, n:] == paths[b, n - 1]).all()
    # The decoded score is the path's score.
    assert torch.allclose(crf.path_score(emissions, paths, lengths_t), scores, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "name,scheme_tags,allowed,lengths", _constrained_cases(), ids=[c[0] for c in _constrained_cases()]
)
def test_constrained_match_brute_force_and_decode_valid(name, scheme_tags, allowed, lengths):
    n_tags = len(allowed[0])
    seed = sum(map(ord, name))
    crf = _crf(n_tags, seed, allowed)
    emissions, lengths_t = _batch(lengths, n_tags, seed + 1)
    log_z = crf.log_partition(emissions, lengths_t)
    paths, scores = crf.decode(emissions, lengths_t)
    for b, n in enumerate(lengths):
        seqs, brute = _brute(crf, emissions[b, :n], n)
        assert len(seqs) > 0
        assert float(log_z[b]) == pytest.approx(_logsumexp(brute), rel=1e-12, abs=1e-12)
        best = int(brute.argmax())
        path = paths[b, :n].tolist()
        assert path == seqs[best].tolist()
        assert float(scores[b]) == pytest.approx(float(brute[best]), rel=1e-12, abs=1e-12)
        assert _valid(path, allowed)
        if scheme_tags is not None:
            scheme, tags = scheme_tags
            start, trans, end = allowed_transitions(tags, scheme)
            assert start[path[0]] and end[path[-1]] and all(trans[a, c] for a, c in zip(path, path[1:]))
            names = [tags[i] for i in path]
            assert spans_to_tags(tags_to_spans(names), n, scheme) == names
    # The unconstrained log Z is larger: the constraints remove probability mass.
    free = _crf(n_tags, seed)
    assert (free.log_partition(emissions, lengths_t) >= log_z - 1e-12).all()


@pytest.mark.parametrize("name,scheme_tags,allowed,lengths", _NLL_CASES, ids=[c[0] for c in _NLL_CASES])
def test_nll_matches_brute_force_with_unknown_tags(name, scheme_tags, allowed, lengths):
    n_tags = len(allowed[0]) if allowed is not None else 4
    seed = sum(map(ord, name)) + 7
    crf = _crf(n_tags, seed, allowed)
    emissions, lengths_t = _batch(lengths, n_tags, seed + 1)
    rng = np.random.default_rng(seed)
    gold = torch.full(emissions.shape[:2], -1, dtype=torch.long)
    partial = gold.clone()
    for b, n in enumerate(lengths):
        seqs, _ = _brute(crf, emissions[b, :n], n)
        gold[b, :n] = seqs[rng.integers(len(seqs))]  # a valid gold sequence
        hidden = rng.random(n) < 0.5
        hidden[rng.integers(n)] = True  # at least one unknown per sentence
        partial[b, :n] = gold[b, :n].masked_fill(torch.from_numpy(hidden), -1)
    log_z = crf.log_partition(emissions, lengths_t)
    nll_known = crf.nll(emissions, gold, lengths_t)
    nll_partial = crf.nll(emissions, partial, lengths_t)
    # All known: log Z - score(gold), also with padding tags that are not -1.
    assert torch.allclose(nll_known, log_z - crf.path_score(emissions, gold, lengths_t), rtol=1e-12, atol=1e-12)
    assert torch.allclose(crf.nll(emissions, gold.clamp(min=0), lengths_t), nll_known, rtol=0, atol=0)
    for b, n in enumerate(lengths):
        _, all_scores = _brute(crf, emissions[b, :n], n)
        _, gold_score = _brute(crf, emissions[b, :n], n, known=gold[b, :n].tolist())
        _, consistent = _brute(crf, emissions[b, :n], n, known=partial[b, :n].tolist())
        assert float(nll_known[b]) == pytest.approx(_logsumexp(all_scores) - float(gold_score[0]), rel=1e-12, abs=1e-12)
        assert float(nll_partial[b]) == pytest.approx(
            _logsumexp(all_scores) - _logsumexp(consistent), rel=1e-12, abs=1e-12
        )
        assert 0 <= float(nll_partial[b]) <= float(nll_known[b]) + 1e-12


def test_nll_of_forbidden_gold_is_infinite():
    tags, allowed = _scheme_allowed("BIO", ["PER"])  # O B-PER I-PER
    crf = _crf(len(tags), 3, allowed)
    emissions, lengths = _batch([3], len(tags), 4)
    assert math.isinf(float(crf.nll(emissions, torch.tensor([[0, 2, 2]]), lengths)))  # O -> I-PER
    assert math.isfinite(float(crf.nll(emissions, torch.tensor([[0, -1, 2]]), lengths)))  # O B-PER I-PER exists


# ---------------------------------------------------------------------------------------------
# Gradients
# ---------------------------------------------------------------------------------------------


def _gradcheck_nll(crf: LinearChainCRF, emissions: torch.Tensor, tags: torch.Tensor, lengths: torch.Tensor):
    """gradcheck of the summed nll w.r.t. the emissions and the transition, start and end scores
    (the parameters themselves are the inputs: gradcheck perturbs them in place)."""
    emissions = emissions.detach().clone().requires_grad_(True)
    params = (crf.transitions, crf.start, crf.end)
    assert torch.autograd.gradcheck(
        lambda e, *_: crf.nll(e, tags, lengths).sum(), (emissions, *params), eps=1e-6, atol=1e-7
    )
    value = crf.nll(emissions, tags, lengths).sum()
    grads = torch.autograd.grad(value, (emissions, *params))
    assert torch.isfinite(value) and all(torch.isfinite(g).all() for g in grads)
    return grads


@pytest.mark.parametrize("constrained", [False, True])
def test_gradcheck_nll(constrained):
    tags, allowed = _scheme_allowed("BIO", ["PER", "LOC"])  # 5 tags
    crf = _crf(len(tags), 21, allowed if constrained else None)
    emissions, lengths = _batch([4, 2, 3], len(tags), 22)
    # Gold: valid BIO (padding 0); sentence 0 partly unknown, the others fully known; then all known.
    gold = torch.tensor([[1, -1, 0, -1], [3, 4, 0, 0], [0, 1, 2, 0]])
    _gradcheck_nll(crf, emissions, gold, lengths)
    _gradcheck_nll(crf, emissions, torch.tensor([[1, 2, 0, 3], [3, 4, 0, 0], [0, 1, 2, 0]]), lengths)


def test_gradcheck_nll_all_forbidden_sums_stay_finite(monkeypatch):
    """A known B-PER followed by an unknown tag: in the numerator every way into I-LOC at that position
    is forbidden (the sum over previous tags is all -inf). Its gradient must be 0, not NaN."""
    tags, allowed = _scheme_allowed("BIO", ["PER", "LOC"])  # O B-PER I-PER B-LOC I-LOC
    assert tags == ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    crf = _crf(len(tags), 31, allowed)
    emissions, lengths = _batch([4, 3], len(tags), 32)
    # B-PER ? ? I-LOC: into I-LOC at position 1 only B-PER is possible, and B-PER -> I-LOC is forbidden.
    gold = torch.tensor([[1, -1, -1, 4], [3, -1, 0, 0]])
    grads = _gradcheck_nll(crf, emissions, gold, lengths)
    # Brute force of the same numerator (sequences consistent with the known tags, valid ones).
    nll = crf.nll(emissions, gold, lengths)
    for b, n in enumerate([4, 3]):
        _, all_scores = _brute(crf, emissions[b, :n], n)
        _, consistent = _brute(crf, emissions[b, :n], n, known=gold[b, :n].tolist())
        assert float(nll[b]) == pytest.approx(_logsumexp(all_scores) - _logsumexp(consistent), rel=1e-12)
    # The case does exercise the all -inf sums: with torch's own logsumexp the gradient is NaN.
    _log_domain_only(monkeypatch)
    monkeypatch.setattr(crf_module, "_logsumexp", lambda x, dim: torch.logsumexp(x, dim=dim))
    e = emissions.detach().clone().requires_grad_(True)
    nan_grads = torch.autograd.grad(crf.nll(e, gold, lengths).sum(), (e, crf.transitions))
    assert any(torch.isnan(g).any() for g in nan_grads)
    assert all(torch.isfinite(g).all() for g in grads)


# ---------------------------------------------------------------------------------------------
# The scaled forward-backward (the CPU's way) against the log-domain forward algorithm
# ---------------------------------------------------------------------------------------------


def _nll_and_grads(crf: LinearChainCRF, emissions: torch.Tensor, tags: torch.Tensor, lengths: torch.Tensor):
    e = emissions.detach().clone().requires_grad_(True)
    nll = crf.nll(e, tags, lengths)
    grads = torch.autograd.grad(nll.sum(), (e, crf.transitions, crf.start, crf.end))
    return nll.detach(), grads


@pytest.mark.parametrize("unknown", [False, True])
def test_scaled_forward_backward_is_taken_and_exact_in_float32(log_z_algorithm, monkeypatch, unknown):
    """A CoNLL-like float32 batch (9 BIO tags, lengths 1-40) takes the scaled path, whose float64
    sums make its float32 results the float64 log-domain ones rounded once: within one float32
    rounding (2^-24 relative) of them, where the float32 log-domain loop itself errs by about L*T
    roundings of log Z's magnitude."""
    if log_z_algorithm != "scaled":
        pytest.skip("compares the two algorithms itself")
    tags, allowed = _scheme_allowed("BIO", ["PER", "LOC", "ORG", "MISC"])
    lengths = [40, 1, 17, 33, 8, 25]
    crf32 = _crf(len(tags), 61, allowed, dtype=torch.float32)
    emissions, lengths_t = _batch(lengths, len(tags), 62, dtype=torch.float32)
    rng = np.random.default_rng(63)
    gold = torch.zeros(emissions.shape[:2], dtype=torch.long)  # all O: valid
    if unknown:
        gold = gold.masked_fill(torch.from_numpy(rng.random(gold.shape) < 0.3), -1)
    assert crf_module.ScaledForwardBackward.log_sum(emissions, lengths_t, *crf32.constrained()) is not None
    nll, grads = _nll_and_grads(crf32, emissions, gold, lengths_t)
    crf64 = crf32.to(F64)
    _log_domain_only(monkeypatch)
    nll64, grads64 = _nll_and_grads(crf64, emissions.to(F64), gold, lengths_t)
    u = 2.0**-24
    log_z = crf64.log_partition(emissions.to(F64), lengths_t)
    # nll = log Z - numerator: each rounded once (error u * |term|), then subtracted in float32.
    assert ((nll.to(F64) - nll64).abs() <= 3 * u * (log_z.abs() + nll64.abs()) + 1e-30).all()
    # A gradient is (marginal of log Z) - (that of the numerator), each part rounded once to
    # float32 and their difference once more: at most 2 u (|a| + |b|) + u |a - b|, where a part is
    # at most 1 for an emission and at most the batch's token count for a start, end or transition.
    for g, g64, part in zip(grads, grads64, [1, sum(lengths), len(lengths), len(lengths)]):
        assert ((g.to(F64) - g64).abs() <= u * (4 * part + g64.abs()) + 1e-30).all()


def test_scaled_forward_backward_steps_aside_for_extreme_and_non_finite_scores(log_z_algorithm):
    """Where the scaled sums would underflow (a forced tag scored far below the others) or a score
    is not finite, the log-domain algorithm runs instead, with its own results."""
    if log_z_algorithm != "scaled":
        pytest.skip("calls the scaled algorithm itself")
    allowed = (torch.tensor([True, False]), torch.ones(2, 2, dtype=torch.bool), torch.ones(2, dtype=torch.bool))
    crf = _crf(2, 71, allowed)
    emissions, lengths = _batch([3, 2], 2, 72)
    assert crf_module.ScaledForwardBackward.log_sum(emissions, lengths, *crf.constrained()) is not None
    far = emissions.clone()
    far[:, 0, 1] = 1e4  # only tag 0 may start: the first step's sum is exp(-1e4) of its maximum
    assert crf_module.ScaledForwardBackward.log_sum(far, lengths, *crf.constrained()) is None
    log_z = crf.log_partition(far, lengths)
    for b, n in enumerate([3, 2]):
        _, brute = _brute(crf, far[b, :n], n)
        assert float(log_z[b]) == pytest.approx(_logsumexp(brute), rel=1e-12)
    for bad in (float("nan"), float("inf")):
        hostile = emissions.clone()
        hostile[1, 1, 0] = bad
        assert crf_module.ScaledForwardBackward.log_sum(hostile, lengths, *crf.constrained()) is None
    # Padding is never read, whatever it holds.
    padded = emissions.clone()
    padded[1, 2] = float("nan")
    got = crf_module.ScaledForwardBackward.log_sum(padded, lengths, *crf.constrained())
    assert got is not None and torch.equal(got, crf.log_partition(emissions, lengths))


# ---------------------------------------------------------------------------------------------
# Padding independence (float32)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pad_value", [None, 0.0, float("-inf"), float("nan")])
def test_padding_independence_float32(pad_value):
    """A sentence scores and decodes the same alone and inside a padded batch, whatever the padding.

    Tolerance: each forward step of a sentence is the same float32 computation in both cases (a
    logsumexp over T terms, then one addition); only the order in which a vectorized reduction adds
    the T terms may differ between a [1, T, T] and a [B, T, T] tensor. Each step then differs by at
    most ~T ulps of its value, and the differences add up over the L steps and the final logsumexp:
    |diff| <= (L + 1) * T * eps32 * max|alpha|, with a factor 4 of margin. Padded positions themselves
    contribute exactly nothing (each sentence's sums are read at its own last position). Viterbi only adds
    and takes maxima, the same additions in the same order, so its paths must be identical.
    """
    n_tags = 9
    tags, allowed = _scheme_allowed("BILOU", ["PER", "LOC"])
    lengths = [7, 1, 12, 5, 12, 3]
    for constraints in (None, allowed):
        crf = _crf(n_tags, 41, constraints, dtype=torch.float32)
        emissions, lengths_t = _batch(lengths, n_tags, 42, dtype=torch.float32, pad_value=pad_value)
        gold = torch.randint(0, n_tags, emissions.shape[:2], generator=torch.Generator().manual_seed(43))
        if constraints is not None:
            gold = crf.decode(emissions.nan_to_num(0.0, 0.0, 0.0), lengths_t)[0]  # a valid gold sequence
        partial = gold.clone()
        partial[:, ::3] = -1
        log_z = crf.log_partition(emissions, lengths_t)
        paths, scores = crf.decode(emissions, lengths_t)
        path_scores = crf.path_score(emissions, gold, lengths_t)
        nll_partial = crf.nll(emissions, partial, lengths_t)
        for value in (log_z, scores, path_scores, nll_partial):
            assert torch.isfinite(value).all()
        eps = torch.finfo(torch.float32).eps
        for b, n in enumerate(lengths):
            alone = emissions[b : b + 1, :n]
            one = torch.tensor([n])
            tol = 4 * (n + 1) * n_tags * eps * max(1.0, float(log_z[b].abs()))
            assert abs(float(crf.log_partition(alone, one)[0] - log_z[b])) <= tol
            p, s = crf.decode(alone, one)
            assert p[0].tolist() == paths[b, :n].tolist()
            assert abs(float(s[0] - scores[b])) <= tol
            assert abs(float(crf.path_score(alone, gold[b : b + 1, :n], one)[0] - path_scores[b])) <= tol
            assert abs(float(crf.nll(alone, partial[b : b + 1, :n], one)[0] - nll_partial[b])) <= 2 * tol


def test_decode_ignores_positions_past_the_longest_sentence():
    """Emissions longer than every sentence (a padded batch from elsewhere): the extra positions
    change nothing and repeat each sentence's last tag."""
    crf = _crf(5, 7, dtype=torch.float32)
    emissions, lengths_t = _batch([4, 2, 4, 1], 5, 8, dtype=torch.float32)
    wide = torch.cat([emissions, torch.randn(4, 3, 5)], dim=1)
    paths, scores = crf.decode(emissions, lengths_t)
    wide_paths, wide_scores = crf.decode(wide, lengths_t)
    assert torch.equal(wide_paths[:, :4], paths) and torch.equal(wide_scores, scores)
    assert (wide_paths[:, 4:] == paths[:, 3:4]).all()


@pytest.mark.parametrize("pad_value", [None, 1e4, float("-inf"), float("nan")])
def test_padding_independence_of_gradients(pad_value):
    """The nll's gradients are those of each sentence alone (float64, sums of a few dozen terms:
    1e-10 is far above their rounding), padded positions get exactly 0, whatever the padding holds."""
    tags, allowed = _scheme_allowed("BIO", ["PER", "LOC"])
    lengths = [5, 2, 4]
    for constraints in (None, allowed):
        crf = _crf(len(tags), 51, constraints)
        emissions, lengths_t = _batch(lengths, len(tags), 52, pad_value=pad_value)
        gold = torch.tensor([[1, 2, 0, 3, 4], [0, 1, 0, 0, 0], [3, 4, 4, 0, 0]])
        partial = gold.clone()
        partial[0, 1], partial[2, 2] = -1, -1
        pad = torch.arange(emissions.shape[1]) >= lengths_t.unsqueeze(1)
        params = (crf.transitions, crf.start, crf.end)
        for g in (gold, partial):
            leaf = emissions.clone().requires_grad_(True)
            batch_grads = torch.autograd.grad(crf.nll(leaf, g, lengths_t).sum(), (leaf, *params))
            assert all(torch.isfinite(x[~pad] if x.dim() == 3 else x).all() for x in batch_grads)
            assert (batch_grads[0][pad] == 0).all()
            summed = [torch.zeros_like(p) for p in params]
            for b, n in enumerate(lengths):
                alone = emissions[b : b + 1, :n].clone().requires_grad_(True)
                grads = torch.autograd.grad(crf.nll(alone, g[b : b + 1, :n], torch.tensor([n])).sum(), (alone, *params))
                assert torch.allclose(batch_grads[0][b, :n], grads[0][0], rtol=1e-10, atol=1e-10)
                summed = [s + x for s, x in zip(summed, grads[1:])]
            for x, s in zip(batch_grads[1:], summed):
                assert torch.allclose(x, s, rtol=1e-10, atol=1e-10)


# ---------------------------------------------------------------------------------------------
# Invalid inputs
# ---------------------------------------------------------------------------------------------


def test_invalid_inputs_raise_value_error():
    crf = _crf(3, 0)
    emissions, lengths = _batch([3, 2], 3, 1)
    tags = torch.zeros(2, 3, dtype=torch.long)
    calls = [crf.log_partition, crf.decode, lambda e, n: crf.nll(e, tags, n), lambda e, n: crf.path_score(e, tags, n)]
    bad = [
        (emissions, torch.tensor([3, 0])),  # length 0
        (emissions, torch.tensor([4, 2])),  # length > L
        (emissions, torch.tensor([-1, 2])),
        (emissions, torch.tensor([3])),  # lengths of the wrong batch size
        (emissions, torch.tensor([[3, 2]])),
        (emissions[..., :2], lengths),  # wrong number of tags
        (torch.zeros(2, 3, 4, dtype=F64), lengths),
        (emissions[0], lengths),  # 2-D
        (emissions.unsqueeze(0), lengths),  # 4-D
        (emissions[:, :0], torch.tensor([1, 1])),  # L = 0
    ]
    for call in calls:
        for e, n in bad:
            with pytest.raises(ValueError):
                call(e, n)
    with pytest.raises(ValueError):
        LinearChainCRF(0)
    with pytest.raises(ValueError):
        LinearChainCRF(
            3, (torch.ones(3, dtype=torch.bool), torch.ones(3, 2, dtype=torch.bool), torch.ones(3, dtype=torch.bool))
        )


# ---------------------------------------------------------------------------------------------
# Tag schemes
# ---------------------------------------------------------------------------------------------


def test_tag_names():
    assert tag_names(["PER", "LOC"], "BIO") == ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    assert tag_names(["PER"], "BILOU") == ["O", "B-PER", "I-PER", "L-PER", "U-PER"]
    assert tag_names(["NN", "VB"], "tags") == ["NN", "VB"]
    with pytest.raises(ValueError):
        tag_names(["PER"], "IOB1")


def test_allowed_transitions_bio():
    tags = tag_names(["PER", "LOC"], "BIO")
    i = {t: k for k, t in enumerate(tags)}
    start, trans, end = allowed_transitions(tags, "BIO")
    assert start.dtype == bool and trans.shape == (5, 5)
    assert not trans[i["O"], i["I-PER"]] and not trans[i["O"], i["I-LOC"]]
    assert not trans[i["B-PER"], i["I-LOC"]] and not trans[i["I-PER"], i["I-LOC"]] and not trans[i["B-LOC"], i["I-PER"]]
    assert not start[i["I-PER"]] and not start[i["I-LOC"]]
    assert trans[i["B-PER"], i["I-PER"]] and trans[i["I-PER"], i["I-PER"]] and trans[i["I-PER"], i["B-LOC"]]
    assert trans[i["B-PER"], i["B-PER"]] and trans[i["O"], i["O"]] and trans[i["I-LOC"], i["O"]]
    assert start[i["O"]] and start[i["B-LOC"]] and end.all()  # any BIO tag may end a sentence
    # Everything into O or B-* is allowed.
    assert trans[:, [i["O"], i["B-PER"], i["B-LOC"]]].all()


def test_allowed_transitions_bilou():
    tags = tag_names(["PER", "LOC"], "BILOU")
    i = {t: k for k, t in enumerate(tags)}
    start, trans, end = allowed_transitions(tags, "BILOU")
    for x in ("PER", "LOC"):
        assert not trans[i[f"B-{x}"], i["O"]] and not trans[i[f"I-{x}"], i["O"]]
        assert (
            not trans[i[f"L-{x}"], i[f"I-{x}"]]
            and not trans[i[f"U-{x}"], i[f"I-{x}"]]
            and not trans[i[f"L-{x}"], i[f"L-{x}"]]
        )
        assert not trans[i[f"B-{x}"], i[f"B-{x}"]] and not trans[i[f"B-{x}"], i[f"U-{x}"]]
        assert not start[i[f"I-{x}"]] and not start[i[f"L-{x}"]] and start[i[f"B-{x}"]] and start[i[f"U-{x}"]]
        assert not end[i[f"B-{x}"]] and not end[i[f"I-{x}"]] and end[i[f"L-{x}"]] and end[i[f"U-{x}"]]
        assert trans[i[f"B-{x}"], i[f"I-{x}"]] and trans[i[f"B-{x}"], i[f"L-{x}"]] and trans[i[f"I-{x}"], i[f"L-{x}"]]
        assert trans[i[f"L-{x}"], i["O"]] and trans[i[f"U-{x}"], i["B-PER"]] and trans[i["O"], i[f"U-{x}"]]
    assert not trans[i["B-PER"], i["I-LOC"]] and not trans[i["I-PER"], i["L-LOC"]]
    assert start[i["O"]] and end[i["O"]]


def test_allowed_transitions_tags_scheme_allows_all():
    start, trans, end = allowed_transitions(["NN", "VB", "DT"], "tags")
    assert start.all() and trans.all() and end.all() and trans.shape == (3, 3)


@pytest.mark.parametrize(
    "scheme,labels,max_n",
    [("BIO", ["PER"], 5), ("BIO", ["PER", "LOC"], 4), ("BILOU", ["PER"], 5), ("BILOU", ["PER", "LOC"], 4)],
)
def test_allowed_sequences_are_exactly_the_well_formed_ones(scheme, labels, max_n):
    """Exhaustively: a tag sequence passes allowed_transitions exactly when its spans re-encode to it."""
    tags = tag_names(labels, scheme)
    allowed = allowed_transitions(tags, scheme)  # numpy: quick to index one element at a time
    for n in range(1, max_n + 1):
        for seq in itertools.product(range(len(tags)), repeat=n):
            names = [tags[k] for k in seq]
            assert _valid(seq, allowed) == (spans_to_tags(tags_to_spans(names), n, scheme) == names), names


def test_spans_round_trip():
    spans = [(0, 1, "PER"), (2, 5, "LOC"), (5, 7, "PER"), (8, 9, "ORG")]
    for scheme in ("BIO", "BILOU"):
        tags = spans_to_tags(spans, 10, scheme)
        assert tags_to_spans(tags) == spans
    assert spans_to_tags(spans, 10, "BILOU")[:7] == ["U-PER", "O", "B-LOC", "I-LOC", "L-LOC", "B-PER", "L-PER"]
    assert spans_to_tags(spans, 10, "BIO")[:7] == ["B-PER", "O", "B-LOC", "I-LOC", "I-LOC", "B-PER", "I-PER"]
