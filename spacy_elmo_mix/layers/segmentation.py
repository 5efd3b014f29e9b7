"""How a ``Doc`` is cut into the token sequences the biLM reads.

ELMo was trained on sentences: the component uses ``doc.sents`` when sentence boundaries are set,
and otherwise cuts the doc into consecutive windows of at most ``max_length`` tokens (sentences longer
than ``max_length`` are cut the same way), so any doc, however long, is processed in bounded memory.
The segments cover the doc exactly, in order.
"""

from __future__ import annotations

from typing import List, Tuple

from spacy.tokens import Doc

# The component's default (``spacy-elmo-mix.BiLM.v3`` max_length); the layer cache is keyed by
# these sequences, so precomputing a cache must use the component's value.
DEFAULT_MAX_LENGTH = 256


def doc_segments(doc: Doc, max_length: int = DEFAULT_MAX_LENGTH) -> List[Tuple[int, int]]:
    """``(start, end)`` token offsets of the segments of ``doc``, in order.

    max_length: the longest segment, in tokens (a positive integer).
    """
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        raise ValueError(f"max_length must be a positive integer, got {max_length!r}")
    if len(doc) == 0:
        return []
    if doc.has_annotation("SENT_START"):
        spans = [(sent.start, sent.end) for sent in doc.sents]
    else:
        spans = [(0, len(doc))]
    return [
        (start, min(start + max_length, end))
        for sent_start, end in spans
        for start in range(sent_start, end, max_length)
    ]


def sentence_token_lists(doc: Doc, max_length: int = DEFAULT_MAX_LENGTH) -> List[List[str]]:
    """The token texts of each segment of ``doc`` (see :func:`doc_segments`)."""
    return [[t.text for t in doc[start:end]] for start, end in doc_segments(doc, max_length)]
