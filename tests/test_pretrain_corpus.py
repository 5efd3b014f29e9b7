"""Pretraining input: tokenization, vocabulary, batches, and bad files (clear errors or counted skips)."""

from __future__ import annotations

import numpy as np
import pytest

from spacy_elmo_mix.__main__ import main as cli_main
from spacy_elmo_mix.pretrain import CorpusError, Vocabulary, read_corpus
from spacy_elmo_mix.pretrain.batches import IGNORE, char_table, epoch_plan, make_batch, make_examples
from spacy_elmo_mix.pretrain.softmax import cutoffs_for


def write(path, data: bytes):
    path.write_bytes(data)
    return path


def test_spacy_tokenization_and_pretokenized(tmp_path):
    f = write(tmp_path / "a.txt", "Don't stop, Mr. Smith.\n\n  \nx  y\n".encode())
    corpus = read_corpus([f])
    words = [[corpus.types[i] for i in s] for s in corpus.sentences]
    assert words == [["Do", "n't", "stop", ",", "Mr.", "Smith", "."], ["x", "y"]]
    split = read_corpus([f], pretokenized=True)
    assert [split.types[i] for i in split.sentences[0]] == ["Don't", "stop,", "Mr.", "Smith."]
    assert corpus.types[:2] == ["<S>", "</S>"]


def test_vocabulary_by_frequency_with_min_count(tmp_path):
    corpus = read_corpus([write(tmp_path / "a.txt", b"b a b c\nb a\n")], pretokenized=True)
    vocab = Vocabulary.build(corpus.types, corpus.type_counts(), min_count=2)
    assert vocab.words == ["<S>", "</S>", "<UNK>", "b", "a"]
    assert vocab.type_to_vocab(["<S>", "</S>", "a", "c"]).tolist() == [0, 1, 4, 2]
    vocab.save(tmp_path / "vocab.txt")
    assert Vocabulary.load(tmp_path / "vocab.txt").words == vocab.words
    assert len(Vocabulary.build(corpus.types, corpus.type_counts(), max_size=4)) == 4


def test_batches_pack_both_directions_with_next_word_targets():
    types = ["<S>", "</S>", "a", "b", "c"]
    to_vocab = np.array([0, 1, 2, 3, 4])
    batch = make_batch([np.array([2, 3, 4]), np.array([4])], char_table(types), to_vocab)
    assert batch.n_predictions == 4 + 2 and batch.batch_sizes == [2, 2, 2, 1, 1]
    # Packed rows alternate examples while both are active: longest example first.
    assert batch.forward_targets.tolist() == [2, 4, 3, 1, 4, IGNORE, 1, IGNORE]
    assert batch.backward_targets.tolist() == [4, 4, 3, 0, 2, IGNORE, 0, IGNORE]
    assert make_examples([np.arange(5)], max_len=2)[2].tolist() == [4]


def test_epoch_plan_covers_every_example_once_and_is_reproducible():
    lengths = np.random.default_rng(0).integers(1, 30, size=500)
    plan = epoch_plan(lengths, 200, seed=1, epoch=2)
    assert sorted(np.concatenate(plan).tolist()) == list(range(500))
    assert all(np.array_equal(a, b) for a, b in zip(plan, epoch_plan(lengths, 200, seed=1, epoch=2)))
    assert not np.array_equal(plan[0], epoch_plan(lengths, 200, seed=1, epoch=3)[0])


def test_softmax_cutoffs():
    assert cutoffs_for(40_000) == [2000, 10_000]
    assert cutoffs_for(10) == [5]


def test_empty_and_missing_files_are_clear_errors(tmp_path):
    with pytest.raises(CorpusError, match="empty.txt is empty"):
        read_corpus([write(tmp_path / "empty.txt", b"")])
    with pytest.raises(CorpusError, match="not found: .*missing.txt"):
        read_corpus([tmp_path / "missing.txt"])
    with pytest.raises(CorpusError, match="blank.txt is empty"):
        read_corpus([write(tmp_path / "blank.txt", b"  \n\t\n")])


def test_binary_file_is_a_clear_error(tmp_path):
    with pytest.raises(CorpusError, match=r"model.bin looks like a binary file"):
        read_corpus([write(tmp_path / "model.bin", bytes(range(256)) * 10)])


def test_overlong_lines_are_counted_and_skipped(tmp_path):
    data = b"good line here\n" + b"w " * 500_000 + b"\nlast line\n"
    f = write(tmp_path / "mixed.txt", data)
    with pytest.warns(UserWarning) as record:
        corpus = read_corpus([f])
    assert len(corpus.sentences) == 2
    assert corpus.skipped == {"longer than 20000 characters": 1}
    assert "mixed.txt: skipped 1 line(s): longer than 20000" in " ".join(str(w.message) for w in record)


def test_other_encodings_are_an_error_naming_file_and_line_unless_given(tmp_path):
    f = write(tmp_path / "latin1.txt", "plain words\ncaf\u00e9 na\u00efve\n".encode("latin-1"))
    with pytest.raises(CorpusError, match=r"latin1.txt:2: not valid utf-8 text \(byte 0xe9 at byte 4 .*--encoding"):
        read_corpus([f], pretokenized=True)
    assert read_corpus([f], pretokenized=True, encoding="latin-1").types[2:] == [
        "plain",
        "words",
        "caf\u00e9",
        "na\u00efve",
    ]
    with pytest.raises(CorpusError, match="Unknown text encoding 'klingon'"):
        read_corpus([f], encoding="klingon")


def test_utf8_byte_order_mark_is_dropped(tmp_path):
    f = write(tmp_path / "bom.txt", b"\xef\xbb\xbfhello world\nhello again\n")
    corpus = read_corpus([f], pretokenized=True)
    assert corpus.types[2:] == ["hello", "world", "again"]


def test_binary_data_after_the_first_8_kib_is_an_error_naming_the_line(tmp_path):
    text = b"a clean line of text\n" * 500  # 10.5 KB of text, then binary data
    f = write(tmp_path / "grows_binary.txt", text + b"ok \x01\x02\x03 word\n")
    with pytest.raises(CorpusError, match=r"grows_binary.txt:501: control character U\+0001 at column 4"):
        read_corpus([f], pretokenized=True)
    nul = write(tmp_path / "nul.txt", text + b"x\x00y\n")
    with pytest.raises(CorpusError, match=r"nul.txt:501: control character U\+0000"):
        read_corpus([nul], pretokenized=True)
    tabs = write(tmp_path / "tabs.txt", b"tab\tseparated\x0cform feed\r\n")
    assert read_corpus([tabs], pretokenized=True).types[2:] == ["tab", "separated", "form", "feed"]


def test_pretokenized_text_keeps_unicode_spaces_inside_tokens(tmp_path):
    # As in the converted data sets: only ASCII whitespace separates tokens (str.split() would cut
    # "New\u00a0York" in two).
    f = write(tmp_path / "nbsp.txt", "in New\u00a0York 10\u2009000 \u3000x\n".encode("utf-8"))
    assert read_corpus([f], pretokenized=True).types[2:] == ["in", "New\u00a0York", "10\u2009000", "\u3000x"]


def test_globs_and_gzip(tmp_path):
    import gzip

    (tmp_path / "parts").mkdir()
    write(tmp_path / "parts" / "a.txt", b"alpha beta\n")
    with gzip.open(tmp_path / "parts" / "b.txt.gz", "wb") as g:
        g.write(b"gamma delta\n")
    corpus = read_corpus([str(tmp_path / "parts" / "*")], pretokenized=True)
    assert corpus.types[2:] == ["alpha", "beta", "gamma", "delta"]
    with pytest.raises(CorpusError, match=r"No text file matches the pattern .*nothing\*\.txt"):
        read_corpus([str(tmp_path / "nothing*.txt")])
    broken = write(tmp_path / "broken.txt.gz", b"not gzip data at all")
    with pytest.raises(CorpusError, match="broken.txt.gz"):
        read_corpus([broken])


def test_cli_reports_bad_input_without_a_traceback(tmp_path, capsys):
    binary = write(tmp_path / "data.bin", b"\x00\x01\x02" * 100)
    assert cli_main(["pretrain", str(binary), "--output", str(tmp_path / "out"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "data.bin" in err and "Traceback" not in err


def test_a_huge_line_is_skipped_without_being_read_whole(tmp_path):
    import tracemalloc

    f = write(tmp_path / "one_line.txt", b"first line\n" + b"x" * 30_000_000 + b"\nlast line\n")
    tracemalloc.start()
    try:
        with pytest.warns(UserWarning, match="skipped 1 line"):
            corpus = read_corpus([f], pretokenized=True, max_line_chars=1000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert corpus.types[2:] == ["first", "line", "last"] and peak < 10_000_000, peak
