"""Character ids of unusual tokens, as AllenNLP's ``ELMoCharacterMapper`` makes them.

Ids: begin-of-word 259, the UTF-8 bytes plus one (at most 48), end-of-word 260, padding 261.
"""

from __future__ import annotations

import numpy as np
import pytest

from spacy_elmo_mix.bilm import batch_to_char_ids, word_to_char_ids

BOW, EOW, PAD = 259, 260, 261


def expected_ids(byte_ids):
    """The 50 ids of a word whose (already cut) UTF-8 bytes plus one are ``byte_ids``."""
    ids = [BOW, *byte_ids, EOW]
    return np.array(ids + [PAD] * (50 - len(ids)))


@pytest.mark.parametrize(
    "token, byte_ids",
    [
        ("", []),
        (" ", [33]),
        ("\t\n", [10, 11]),
        ("\x00\x7f", [1, 128]),
        ("\U0001f600", [0xF0 + 1, 0x9F + 1, 0x98 + 1, 0x80 + 1]),  # 4-byte UTF-8 emoji
        ("a" * 500, [98] * 48),
        ("\u20ac" * 20, [0xE2 + 1, 0x82 + 1, 0xAC + 1] * 16),  # 60 bytes cut to 48
        (
            "a" + "\u20ac" * 20,
            [98] + [0xE2 + 1, 0x82 + 1, 0xAC + 1] * 15 + [0xE2 + 1, 0x82 + 1],
        ),  # cut inside a character
        ("<s>", [61, 116, 63]),
    ],
    ids=["empty", "space", "tab-newline", "control", "emoji", "500-chars", "euro-cut", "cut-mid-char", "lowercase-s"],
)
def test_word_ids(token, byte_ids):
    np.testing.assert_array_equal(word_to_char_ids(token), expected_ids(byte_ids))


@pytest.mark.parametrize("token, marker", [("<S>", 257), ("</S>", 258)])
def test_literal_sentence_markers_map_to_marker_ids(token, marker):
    """Like AllenNLP, a token spelled ``<S>``/``</S>`` gets the begin/end-of-sentence ids."""
    np.testing.assert_array_equal(word_to_char_ids(token), [BOW, marker, EOW] + [PAD] * 47)


@pytest.mark.parametrize("token", [None, 5, b"bytes", ["a"]])
def test_non_str_token_is_type_error(token):
    with pytest.raises(TypeError, match="must be str"):
        word_to_char_ids(token)
    with pytest.raises(TypeError, match="must be str"):
        batch_to_char_ids([["ok", token]])


def test_batch_pads_absent_tokens_with_zero():
    ids = batch_to_char_ids([["a", "bc"], [], ["d"]])
    assert ids.shape == (3, 2, 50) and ids.dtype == np.int64
    np.testing.assert_array_equal(ids[0, 1], word_to_char_ids("bc"))
    assert not ids[1].any() and not ids[2, 1].any()
    assert batch_to_char_ids([]).shape == (0, 0, 50)


def test_other_max_characters():
    """``max_characters_per_token`` other than 50 cuts words to that many ids minus two."""
    np.testing.assert_array_equal(word_to_char_ids("abcdef", max_chars=5), [BOW, 98, 99, 100, EOW])
