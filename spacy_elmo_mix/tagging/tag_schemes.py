"""Tag schemes of a CRF: the tag set of span labels, the allowed transitions, spans <-> tags.

``BIO``: ``B-X`` begins a span of label X, ``I-X`` continues it, ``O`` is outside any span.
``BILOU``: also ``L-X`` (last token of a multi-token span) and ``U-X`` (a one-token span).
``tags``: token tags with no span structure (POS): every transition is allowed.

Corpora annotated in IOB1 (``I-X`` may begin a span) are converted to spans when they are read
(``convert``), so IOB1 is an input format, not a tag set a CRF predicts in.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np

OUTSIDE = "O"
SCHEMES = ("BIO", "BILOU", "tags")
# The prefixes of each span scheme, and which of them may start, continue and end a span.
_PREFIXES = {"BIO": "BI", "BILOU": "BILU"}
_OPENS = {"B", "U"}  # a span starts with these
_CLOSES = {"BIO": {"B", "I"}, "BILOU": {"L", "U"}}  # a span may end after these
_FOLLOWS = {"BIO": {"B": "I", "I": "I"}, "BILOU": {"B": "IL", "I": "IL"}}  # inside-span moves


def check_scheme(scheme: str) -> str:
    if scheme not in SCHEMES:
        raise ValueError(f"unknown tag scheme {scheme!r}; choose one of {', '.join(SCHEMES)}")
    return scheme


def tag_names(labels: Sequence[str], scheme: str) -> List[str]:
    """The tags of ``labels`` in ``scheme``: ``O`` first, then each label's prefixed tags
    (``tags``: the labels themselves)."""
    check_scheme(scheme)
    if scheme == "tags":
        return list(labels)
    return [OUTSIDE] + [f"{prefix}-{label}" for label in labels for prefix in _PREFIXES[scheme]]


def _split(tag: str) -> Tuple[str, str]:
    """(prefix, label) of a span tag; ("O", "") for outside."""
    return (OUTSIDE, "") if tag == OUTSIDE else (tag[0], tag[2:])


def allowed_transitions(tags: Sequence[str], scheme: str) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Boolean (start [T], transitions [T, T] from row to column, end [T]) of ``tags`` in ``scheme``.

    A sequence is allowed exactly when its tags spell well-formed spans: in BIO an ``I-X`` follows only
    ``B-X`` or ``I-X``; in BILOU a span is ``U-X`` or ``B-X (I-X)* L-X``.
    """
    check_scheme(scheme)
    n = len(tags)
    if scheme == "tags":
        return np.ones(n, bool), np.ones((n, n), bool), np.ones(n, bool)
    parts = [_split(tag) for tag in tags]
    starts = np.array([p in _OPENS or p == OUTSIDE for p, _ in parts])
    ends = np.array([p in _CLOSES[scheme] or p == OUTSIDE for p, _ in parts])
    moves = np.zeros((n, n), bool)
    for i, (p_from, l_from) in enumerate(parts):
        for j, (p_to, l_to) in enumerate(parts):
            if p_to in _FOLLOWS[scheme].get(p_from, ""):
                moves[i, j] = l_from == l_to  # continuing the same span
            else:  # a span may close after `from` and a new one (or O) start at `to`
                moves[i, j] = bool(ends[i] and starts[j])
    return starts, moves, ends


def spans_to_tags(spans: Sequence[Tuple[int, int, str]], n_tokens: int, scheme: str) -> List[str]:
    """The tag of each of ``n_tokens`` tokens for non-overlapping ``(start, end, label)`` spans
    (token offsets, end exclusive)."""
    tags = [OUTSIDE] * n_tokens
    for start, end, label in spans:
        if scheme == "BILOU" and end - start == 1:
            tags[start] = f"U-{label}"
            continue
        tags[start] = f"B-{label}"
        for i in range(start + 1, end):
            tags[i] = f"I-{label}"
        if scheme == "BILOU":
            tags[end - 1] = f"L-{label}"
    return tags


def tags_to_spans(tags: Sequence[str]) -> List[Tuple[int, int, str]]:
    """The ``(start, end, label)`` spans of a valid BIO or BILOU tag sequence."""
    spans: List[Tuple[int, int, str]] = []
    start, open_label = None, ""
    for i, tag in enumerate(list(tags) + [OUTSIDE]):
        prefix, label = _split(tag)
        if start is not None and prefix not in "IL":
            spans.append((start, i, open_label))
            start = None
        if prefix in _OPENS:
            start, open_label = i, label
        if prefix in "LU" and start is not None:
            spans.append((start, i + 1, open_label))
            start = None
    return spans
