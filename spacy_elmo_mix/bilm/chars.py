"""Character ids exactly as AllenNLP's ``ELMoCharacterMapper`` makes them.

Each token becomes ``max_characters_per_token`` ids: begin-of-word, its UTF-8 bytes plus one (cut to
``max_characters_per_token - 2`` bytes), end-of-word, then padding. Ids are shifted by one so that 0
marks a padded (absent) token. The sentence markers ``<S>`` and ``</S>`` have reserved ids; like
AllenNLP, a token whose text is literally ``<S>`` or ``</S>`` maps to them too.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import numpy as np

BOS_CHAR = 256 + 1
EOS_CHAR = 257 + 1
BOW_CHAR = 258 + 1
EOW_CHAR = 259 + 1
PAD_CHAR = 260 + 1
BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"


def _marker(char: int, max_chars: int) -> np.ndarray:
    ids = np.full(max_chars, PAD_CHAR, dtype=np.int64)
    ids[:3] = (BOW_CHAR, char, EOW_CHAR)
    return ids


@lru_cache(maxsize=2**18)
def _word_ids(word: str, max_chars: int) -> bytes:
    if word == BOS_TOKEN:
        return _marker(BOS_CHAR, max_chars).tobytes()
    if word == EOS_TOKEN:
        return _marker(EOS_CHAR, max_chars).tobytes()
    encoded = word.encode("utf-8", "ignore")[: max_chars - 2]
    ids = np.full(max_chars, PAD_CHAR, dtype=np.int64)
    ids[0] = BOW_CHAR
    ids[1 : len(encoded) + 1] = np.frombuffer(encoded, dtype=np.uint8).astype(np.int64) + 1
    ids[len(encoded) + 1] = EOW_CHAR
    return ids.tobytes()


def word_to_char_ids(word: str, max_chars: int = 50) -> np.ndarray:
    """The ``max_chars`` character ids of one token (int64)."""
    if not isinstance(word, str):
        raise TypeError(f"ELMo tokens must be str, got {type(word).__name__}: {word!r}")
    return np.frombuffer(_word_ids(word, max_chars), dtype=np.int64)


def batch_to_char_ids(sentences: Sequence[Sequence[str]], max_chars: int = 50) -> np.ndarray:
    """``[n_sentences, max_len, max_chars]`` ids; positions past a sentence's end are all 0.

    No sentence markers are added here: the biLM adds ``<S>``/``</S>`` itself.
    """
    max_len = max((len(s) for s in sentences), default=0)
    out = np.zeros((len(sentences), max_len, max_chars), dtype=np.int64)
    for i, sentence in enumerate(sentences):
        if sentence:
            out[i, : len(sentence)] = np.stack([word_to_char_ids(w, max_chars) for w in sentence])
    return out


def sentence_markers(max_chars: int = 50) -> np.ndarray:
    """``[2, max_chars]``: the ids of ``<S>`` and ``</S>``."""
    return np.stack([_marker(BOS_CHAR, max_chars), _marker(EOS_CHAR, max_chars)])
