"""convert: CoNLL-2003 / WNUT16 / CoNLL-2000 / CoNLL-U to .spacy, on inline samples and real data."""
from __future__ import annotations

import itertools

import pytest
from spacy.tokens import DocBin
from spacy.vocab import Vocab

from spacy_elmo_mix.cli.convert import main as convert_cli
from spacy_elmo_mix.workflow.convert import ConvertError, convert_dataset, convert_file

CONLL2003 = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O

-DOCSTART- -X- -X- O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER
"""

CONLLU = """# sent_id = 1
# text = Don't stop.
1-2\tDon't\t_\t_\t_\t_\t_\t_\t_\t_
1\tDo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_
2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_
3\tstop\tstop\tVERB\tVB\t_\t0\troot\t_\t_
3.1\tgo\tgo\tVERB\tVB\t_\t_\t_\t3:conj\t_
4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_
"""


def read_docs(path):
    return list(DocBin().from_disk(path).get_docs(Vocab()))


def ents(doc):
    return [(e.start, e.end, e.label_) for e in doc.ents]


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_conll2003_drops_docstart_and_sets_entities(tmp_path):
    stats = convert_file("conll2003", write(tmp_path, "train.txt", CONLL2003), tmp_path / "out.spacy")
    docs = read_docs(tmp_path / "out.spacy")
    assert [[t.text for t in d] for d in docs] == [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"]]
    assert [t.whitespace_ for t in docs[0]] == [" ", " ", " ", ""]
    assert ents(docs[0]) == [(0, 1, "ORG"), (2, 3, "MISC")] and ents(docs[1]) == [(0, 2, "PER")]
    assert docs[0][1].ent_iob_ == "O"  # annotated as outside, not missing
    assert (stats.sentences, stats.tokens, stats.skipped_lines, stats.scheme) == (2, 6, 2, "iob2")
    assert stats.labels == {"ORG": 1, "MISC": 1, "PER": 1}


def test_iob1_input_is_detected_and_decoded(tmp_path):
    text = "a _ _ I-PER\nb _ _ I-PER\nc _ _ B-PER\nd _ _ O\ne _ _ I-LOC\nf _ _ I-ORG\n"
    path = write(tmp_path, "iob1.txt", text)
    for scheme in ("auto", "iob1"):
        stats = convert_file("conll2003", path, tmp_path / f"{scheme}.spacy", scheme=scheme)
        assert stats.scheme == "iob1"
        assert ents(read_docs(tmp_path / f"{scheme}.spacy")[0]) == [(0, 2, "PER"), (2, 3, "PER"), (4, 5, "LOC"), (5, 6, "ORG")]
    with pytest.raises(ConvertError, match=r"iob1\.txt:1: I-PER after O is not valid BIO"):
        convert_file("conll2003", path, tmp_path / "strict.spacy", scheme="iob2")
    assert not (tmp_path / "strict.spacy").exists()


def test_wnut16_tab_separated(tmp_path):
    path = write(tmp_path, "dev", "@user\tO\nnew\tB-geo-loc\nyork\tI-geo-loc\n\nlol\tO\n")
    stats = convert_file("wnut16", path, tmp_path / "dev.spacy")
    docs = read_docs(tmp_path / "dev.spacy")
    assert ents(docs[0]) == [(1, 3, "geo-loc")] and len(docs) == 2 and stats.tokens == 4


def test_conll2000_gives_entities_and_tags(tmp_path):
    path = write(tmp_path, "test.txt", "He PRP B-NP\nreckons VBZ B-VP\nthe DT B-NP\ndeficit NN I-NP\n")
    convert_file("conll2000", path, tmp_path / "test.spacy")
    (doc,) = read_docs(tmp_path / "test.spacy")
    assert ents(doc) == [(0, 1, "NP"), (1, 2, "VP"), (2, 4, "NP")]
    assert [t.tag_ for t in doc] == ["B-NP", "B-VP", "B-NP", "I-NP"]


def test_conllu_skips_comments_ranges_and_empty_nodes(tmp_path):
    stats = convert_file("ud_ewt", write(tmp_path, "x-ud-train.conllu", CONLLU), tmp_path / "pos.spacy")
    docs = read_docs(tmp_path / "pos.spacy")
    assert [[(t.text, t.pos_, t.tag_) for t in d] for d in docs] == [
        [("Do", "AUX", "AUX"), ("n't", "PART", "PART"), ("stop", "VERB", "VERB"), (".", "PUNCT", "PUNCT")],
        [("Hi", "INTJ", "INTJ")],
    ]
    assert (stats.skipped_lines, stats.scheme) == (2, None)


def test_max_sentences_and_limit_train(tmp_path):
    data, out = tmp_path / "ud", tmp_path / "corpus"
    data.mkdir()
    for split in ("train", "dev", "test"):
        write(data, f"en_x-ud-{split}.conllu", "\n".join([CONLLU] * 3))  # 6 sentences each
    stats = convert_dataset("ud_ewt", data, out, limit_train=4)
    assert {s: st.sentences for s, st in stats.items()} == {"train": 4, "dev": 6, "test": 6}
    assert stats["train"].truncated and not stats["dev"].truncated
    stats = convert_dataset("ud_ewt", data, out, max_sentences=5, limit_train=4)
    assert {s: st.sentences for s, st in stats.items()} == {"train": 4, "dev": 5, "test": 5}
    assert len(read_docs(out / "dev.spacy")) == 5


@pytest.mark.parametrize(
    "dataset,text,message",
    [
        ("conll2003", "EU NNP B-NP B-ORG\nrejects VBZ O\n", r"bad:2: expected 4 columns, found 3"),
        ("conll2003", "EU NNP B-NP X-ORG\n", r"bad:1: invalid tag 'X-ORG'"),
        ("wnut16", "a\tO\nb c\n", r"bad:2: expected 2 columns, found 1"),
        ("ud_ewt", "1\ta\ta\tNOPE\t_\t_\t0\troot\t_\t_\n", r"bad:1: invalid UPOS tag 'NOPE'"),
        ("ud_ewt", "x\ta\ta\tX\t_\t_\t0\troot\t_\t_\n", r"bad:1: invalid CoNLL-U token id 'x'"),
        ("ud_ewt", "1\ta\ta\tX\n", r"bad:1: expected 10 tab-separated CoNLL-U columns, found 4"),
    ],
)
def test_malformed_lines_name_file_and_line(tmp_path, dataset, text, message):
    with pytest.raises(ConvertError, match=message):
        convert_file(dataset, write(tmp_path, "bad", text), tmp_path / "bad.spacy")
    assert not (tmp_path / "bad.spacy").exists() and not list(tmp_path.glob(".bad.spacy.*"))


def test_cli(tmp_path, capsys):
    path = write(tmp_path, "in.txt", CONLL2003)
    assert convert_cli(["conll2003", str(path), str(tmp_path / "out.spacy"), "--max-sentences", "1"]) == 0
    assert "1 sentences" in capsys.readouterr().out and len(read_docs(tmp_path / "out.spacy")) == 1
    assert convert_cli(["conll2003", str(tmp_path / "absent.txt"), str(tmp_path / "x.spacy")]) == 1
    assert "absent.txt: no such file" in capsys.readouterr().err


REAL_FILES = {
    "conll2003": "conll2003/train.txt",
    "wnut16": "wnut16/train",
    "conll2000": "conll2000/train.txt",
    "ud_ewt": "ud_ewt/en_ewt-ud-train.conllu",
}


@pytest.mark.parametrize("dataset", sorted(REAL_FILES))
def test_real_data_head(data_dir, tmp_path, dataset):
    """The first 200 lines of each real training file convert cleanly."""
    with open(data_dir / REAL_FILES[dataset], encoding="utf-8") as handle:
        head = "".join(itertools.islice(handle, 200))
    stats = convert_file(dataset, write(tmp_path, "head", head), tmp_path / "head.spacy")
    assert stats.sentences > 3 and stats.tokens > 100 and stats.labels
    assert len(read_docs(tmp_path / "head.spacy")) == stats.sentences
