"""convert: CoNLL-2003 / WNUT16 / CoNLL-2000 / CoNLL-U (tags and trees) / SST-5 to .spacy, on inline
samples and real data."""

from __future__ import annotations

import itertools
import json

import pytest
from spacy.tokens import DocBin
from spacy.vocab import Vocab

from spacy_elmo_mix.__main__ import main as cli
from spacy_elmo_mix.cli.convert import main as convert_cli
from spacy_elmo_mix.errors import ElmoInputError
from spacy_elmo_mix.workflow.convert import ConvertError, convert_dataset, convert_file, resolve_dataset

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
        assert ents(read_docs(tmp_path / f"{scheme}.spacy")[0]) == [
            (0, 2, "PER"),
            (2, 3, "PER"),
            (4, 5, "LOC"),
            (5, 6, "ORG"),
        ]
    with pytest.raises(ConvertError, match=r"iob1\.txt:1: I-PER after O is not valid BIO"):
        convert_file("conll2003", path, tmp_path / "strict.spacy", scheme="iob2")
    assert not (tmp_path / "strict.spacy").exists()


def test_wnut16_tab_separated(tmp_path):
    path = write(tmp_path, "dev", "@user\tO\nnew\tB-geo-loc\nyork\tI-geo-loc\n\nlol\tO\n")
    stats = convert_file("wnut16", path, tmp_path / "dev.spacy")
    docs = read_docs(tmp_path / "dev.spacy")
    assert ents(docs[0]) == [(1, 3, "geo-loc")] and len(docs) == 2 and stats.tokens == 4


ARGUMENTS = (
    "1\tShould\t_\t_\tO\n2\tstudents\t_\t_\tB-MajorClaim\n3\tlearn\t_\t_\tI-MajorClaim\n"
    "4\t:\t_\t_\tO\n5\tyes\t_\t_\tB-Claim:For\n6\t.\t_\t_\tO\n\n\n"  # a doubled blank line
    "1\tFirst\t_\t_\tB-Premise:-1:Support\n2\tof\t_\t_\tI-Premise:-1:Support\n3\tall\t_\t_\tI-Premise:-1:Support\n"
)


def test_arguments_keep_every_token_and_strip_the_relation(tmp_path):
    """The persuasive essays: one paragraph per doc, every token line kept as given, the
    component type read before the first ``:`` (the relation suffix dropped)."""
    path = write(tmp_path, "train.dat", ARGUMENTS)
    stats = convert_file("arguments", path, tmp_path / "train.spacy")
    first, second = read_docs(tmp_path / "train.spacy")
    assert [t.text for t in first] == ["Should", "students", "learn", ":", "yes", "."]
    assert ents(first) == [(1, 3, "MajorClaim"), (4, 5, "Claim")] and ents(second) == [(0, 3, "Premise")]
    assert stats.tokens == 9


def test_arguments_file_keeps_every_token_line(data_dir, tmp_path):
    source = data_dir / "arguments" / "dev.dat"
    lines = [line for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    stats = convert_file("arguments", source, tmp_path / "dev.spacy")
    docs = read_docs(tmp_path / "dev.spacy")
    assert stats.tokens == sum(len(d) for d in docs) == len(lines)
    assert {e.label_ for d in docs for e in d.ents} == {"MajorClaim", "Claim", "Premise"}


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


def test_conllu_trees_become_heads_and_relations(tmp_path):
    convert_file("ud_ewt_parse", write(tmp_path, "x-ud-train.conllu", CONLLU), tmp_path / "dep.spacy")
    docs = read_docs(tmp_path / "dep.spacy")
    assert [[(t.text, t.head.i, t.dep_, t.pos_) for t in d] for d in docs] == [
        [
            ("Do", 2, "aux", "AUX"),
            ("n't", 2, "advmod", "PART"),
            ("stop", 2, "ROOT", "VERB"),
            (".", 2, "punct", "PUNCT"),
        ],
        [("Hi", 0, "ROOT", "INTJ")],
    ]
    assert all(len(list(doc.sents)) == 1 for doc in docs)


def _tree(*rows):
    """A CoNLL-U sentence of (head, relation) rows."""
    return "".join(f"{i}\tw{i}\tw\tX\t_\t_\t{head}\t{dep}\t_\t_\n" for i, (head, dep) in enumerate(rows, 1))


@pytest.mark.parametrize(
    "text,message",
    [
        (_tree((0, "root"), (3, "dep")), r"bad:2: head '3' is not a token of the sentence \(1..2, 0: the root\)"),
        (_tree((0, "root"), ("_", "dep")), r"bad:2: head '_' is not a token"),
        (_tree((0, "root"), (0, "root")), r"bad:2: 2 roots \(HEAD 0\): a sentence has one"),
        (_tree((2, "dep"), (1, "dep")), r"bad:1: 0 roots"),
        (_tree((0, "root"), (3, "dep"), (2, "dep")), r"bad:2: the heads form a cycle"),
        (_tree((0, "root"), (1, "_")), r"bad:2: no dependency relation"),
        ("1\ta\ta\tX\t_\t_\t0\troot\t_\t_\n3\tb\tb\tX\t_\t_\t1\tdep\t_\t_\n", r"bad:2: token id 3 out of order"),
    ],
)
def test_bad_trees_name_file_and_line(tmp_path, text, message):
    with pytest.raises(ConvertError, match=message):
        convert_file("ud_ewt_parse", write(tmp_path, "bad", text), tmp_path / "bad.spacy")
    assert not (tmp_path / "bad.spacy").exists()


SST = "__label__4\tA lovely  film .\n\n__label__1\tDull .\n"


def test_labelled_lines_give_one_class_per_doc(tmp_path):
    stats = convert_file("sst5", write(tmp_path, "sst_train.txt", SST), tmp_path / "sst.spacy")
    docs = read_docs(tmp_path / "sst.spacy")
    assert [[t.text for t in d] for d in docs] == [["A", "lovely", "film", "."], ["Dull", "."]]
    assert [d.cats for d in docs] == [
        {"1": 0.0, "2": 0.0, "3": 0.0, "4": 1.0, "5": 0.0},
        {"1": 1.0, "2": 0.0, "3": 0.0, "4": 0.0, "5": 0.0},
    ]
    assert (stats.sentences, stats.tokens, dict(stats.labels)) == (2, 6, {"4": 1, "1": 1})


@pytest.mark.parametrize(
    "text,message",
    [
        ("__label__6\tToo good .\n", r"bad:1: unknown class '6' \(the data set's classes: 1, 2, 3, 4, 5\)"),
        ("__label__3 no tab here\n", r"bad:1: expected LABEL<TAB>tokens separated by spaces"),
        ("__label__3\t   \n", r"bad:1: expected LABEL<TAB>tokens"),
        ("__label__3\tone\ttwo\n", r"bad:1: expected LABEL<TAB>tokens separated by spaces \(one tab\)"),
    ],
)
def test_bad_labelled_lines_name_file_and_line(tmp_path, text, message):
    with pytest.raises(ConvertError, match=message):
        convert_file("sst5", write(tmp_path, "bad", text), tmp_path / "bad.spacy")


def test_sst5_files_keep_every_sentence(data_dir, tmp_path):
    stats = convert_dataset("sst5", data_dir / "sst5", tmp_path / "sst5")
    assert {split: st.sentences for split, st in stats.items()} == {"train": 8544, "dev": 1101, "test": 2210}
    assert sorted(stats["train"].labels) == ["1", "2", "3", "4", "5"]


@pytest.mark.parametrize(
    "options,message",
    [
        ({"format": "labelled_lines", "task": "textcat"}, r"labels None \(a textcat data set needs its classes"),
        ({"format": "labelled_lines", "task": "textcat", "labels": ["a", "a"]}, r"labels \['a', 'a'\]"),
        ({"format": "columns", "task": "parser"}, r"task 'parser' with format 'columns' \(it reads conllu\)"),
        ({"format": "conllu", "task": "ner"}, r"task 'ner' with format 'conllu' \(it reads columns\)"),
        ({"format": "columns", "task": "ner", "labels": ["a", "b"]}, r"only a textcat data set has classes"),
    ],
)
def test_task_format_and_classes_are_checked(options, message):
    with pytest.raises(ElmoInputError, match=message):
        resolve_dataset("mine", **options)


def test_cli_takes_the_classes_of_own_labelled_lines(tmp_path, capsys):
    path = write(tmp_path, "reviews.txt", "pos\tgreat fun\nneg\tno\n")
    args = [str(path), str(tmp_path / "r.spacy"), "--format", "labelled_lines", "--task", "textcat"]
    assert convert_cli(["reviews", *args, "--labels", "neg pos"]) == 0
    assert [d.cats for d in read_docs(tmp_path / "r.spacy")] == [{"neg": 0.0, "pos": 1.0}, {"neg": 1.0, "pos": 0.0}]


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
        ("conll2003", "EU NNP B-NP B-ORG\nrejects VBZ O\n", r"bad:2: expected 4 whitespace-separated columns, found 3"),
        ("conll2003", "EU NNP B-NP X-ORG\n", r"bad:1: invalid tag 'X-ORG'"),
        ("conll2003", "EU NNP B-NP B-ORG\n\u00a0\n", r"bad:2: expected 4 whitespace-separated columns, found 1"),
        ("wnut16", "a\tO\nb c\n", r"bad:2: expected 2 tab-separated columns, found 1"),
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
    assert cli(["convert", "conll2003", str(tmp_path / "absent.txt"), str(tmp_path / "x.spacy")]) == 1
    assert "absent.txt: no such file" in capsys.readouterr().err


# Tokens holding characters that str.split() takes for whitespace but no format separates columns
# with (no-break space, thin space, ideographic space, \x1c-\x1f, NEL, \v, \f, line separator).
ODD_SPACE_WORDS = ["New\u00a0York", "10\u2009000", "\u3000x", "a\x1cb\x1fc", "d\x85e", "f\x0bg\x0ch", "i\u2028j", "."]
ODD_SPACE_TAGS = ["B-LOC", "I-LOC"] + ["O"] * (len(ODD_SPACE_WORDS) - 2)


@pytest.mark.parametrize(
    "dataset, line", [("conll2003", "{} NNP  B-NP {}"), ("conll2000", " {}\tNNP {}"), ("wnut16", "{}\t{}")]
)
def test_other_whitespace_inside_a_token_keeps_it_whole(tmp_path, dataset, line):
    """Column files: only spaces and tabs separate columns (also in runs, and at the ends of a line)."""
    sentences = [zip(ODD_SPACE_WORDS, ODD_SPACE_TAGS), [("New", "O")]]
    text = " \t\n".join("".join(line.format(*pair) + "\n" for pair in sentence) for sentence in sentences)
    stats = convert_file(dataset, write(tmp_path, "odd", text), tmp_path / "odd.spacy")
    docs = read_docs(tmp_path / "odd.spacy")
    assert [t.text for t in docs[0]] == ODD_SPACE_WORDS and [t.text for t in docs[1]] == ["New"]
    assert ents(docs[0]) == [(0, 2, "LOC")] and (stats.sentences, stats.tokens) == (2, len(ODD_SPACE_WORDS) + 1)
    if dataset == "conll2000":  # tags_too: one tag per token
        assert [t.tag_ for t in docs[0]] == ODD_SPACE_TAGS


def test_other_whitespace_inside_a_conllu_form_keeps_it_whole(tmp_path):
    lines = [f"{i}\t{word}\t_\tPROPN\t_\t_\t0\troot\t_\t_" for i, word in enumerate(ODD_SPACE_WORDS, start=1)]
    stats = convert_file("ud_ewt", write(tmp_path, "odd.conllu", "\n".join(lines) + "\n"), tmp_path / "odd.spacy")
    (doc,) = read_docs(tmp_path / "odd.spacy")
    assert [t.text for t in doc] == ODD_SPACE_WORDS and stats.tokens == len(doc)
    assert [t.pos_ for t in doc] == [t.tag_ for t in doc] == ["PROPN"] * len(ODD_SPACE_WORDS)


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


# ------------------------------------------------------------------------------ own data sets, hostile input

JNLPBA = "IL-2\tB-DNA\ngene\tI-DNA\nexpression\tO\n\nNF-kappa\tB-protein\nB\tI-protein\n"


def test_own_two_column_data_set_with_any_file_names(tmp_path, capsys):
    data = tmp_path / "jnlpba"
    data.mkdir()
    for name in ("Genia4ERtask2.iob2", "sample.dev", "Genia4EReval2.iob2"):
        write(data, name, JNLPBA)
    argv = [
        "convert",
        "jnlpba",
        str(data),
        str(tmp_path / "out"),
        "--format",
        "columns",
        "--task",
        "ner",
        "--train",
        "Genia4ERtask2.iob2",
        "--dev",
        "sample.dev",
        "--test",
        "Genia4EReval2.iob2",
    ]
    assert cli(argv) == 0
    docs = read_docs(tmp_path / "out" / "test.spacy")
    assert ents(docs[0]) == [(0, 2, "DNA")] and ents(docs[1]) == [(0, 2, "protein")]
    assert cli(argv[:4] + ["--format", "columns", "--task", "ner"]) == 1  # default names train*/dev*/test*
    err = capsys.readouterr().err
    assert (
        "expected one file matching 'train*' for train, found 0 (files there: Genia4EReval2.iob2, Genia4ERtask2.iob2, sample.dev)"
        in err
    )
    assert "--train/--dev/--test" in err


def test_unknown_data_set_says_what_it_needs(tmp_path, capsys):
    assert cli(["convert", "mine", str(write(tmp_path, "a.txt", JNLPBA)), str(tmp_path / "a.spacy")]) == 1
    err = capsys.readouterr().err
    assert (
        "unknown data set 'mine': known are conll2003, wnut16, conll2000, arguments, ud_ewt" in err
        and "--format" in err
    )


def test_datasets_file_describes_a_data_set(tmp_path):
    spec = {
        "mine": {
            "format": "columns",
            "task": "ner",
            "token_column": 2,
            "tag_column": 1,
            "files": {"train": "a.tsv", "dev": "b.tsv", "test": "c.tsv"},
        }
    }
    registry = write(tmp_path, "sets.json", json.dumps(spec))
    path = write(tmp_path, "a.tsv", "B-PER Ann\nI-PER Lee\nO runs\n")
    assert cli(["convert", "mine", str(path), str(tmp_path / "a.spacy"), "--datasets-file", str(registry)]) == 0
    assert ents(read_docs(tmp_path / "a.spacy")[0]) == [(0, 2, "PER")]
    bad = write(tmp_path, "bad.json", json.dumps({"mine": {**spec["mine"], "tag_column": 0}}))
    with pytest.raises(ElmoInputError, match=r"bad.json: data set 'mine': bad tag_column 0"):
        resolve_dataset("mine", bad)


def test_bilou_and_iobes_are_detected_and_checked(tmp_path):
    text = "a\tU-PER\nb\tB-LOC\nc\tI-LOC\nd\tL-LOC\ne\tO\n\nf\tS-ORG\ng\tB-ORG\nh\tE-ORG\n"
    stats = convert_file("wnut16", write(tmp_path, "x", text), tmp_path / "x.spacy")
    docs = read_docs(tmp_path / "x.spacy")
    assert stats.scheme == "bilou" and ents(docs[0]) == [(0, 1, "PER"), (1, 4, "LOC")]
    assert ents(docs[1]) == [(0, 1, "ORG"), (1, 3, "ORG")]
    with pytest.raises(ConvertError, match=r"bad:3: O after B-LOC is not valid BILOU"):
        convert_file("wnut16", write(tmp_path, "bad", "a\tU-PER\nb\tB-LOC\nc\tO\n"), tmp_path / "bad.spacy")
    with pytest.raises(ConvertError, match=r"bad:1: the sentence end after B-LOC is not valid BILOU"):
        convert_file("wnut16", write(tmp_path, "bad", "a\tB-LOC\n"), tmp_path / "bad.spacy", scheme="bilou")
    with pytest.raises(ConvertError, match=r"bad:1: U-PER is a BILOU tag in a sentence read as iob2"):
        convert_file("wnut16", write(tmp_path, "bad", "a\tU-PER\n"), tmp_path / "bad.spacy", scheme="iob2")


def test_ud_v1_tags_are_accepted(tmp_path):
    text = "1\tcats\tcat\tNOUN\t_\t_\t0\troot\t_\t_\n2\tand\tand\tCONJ\t_\t_\t1\tcc\t_\t_\n"
    convert_file("ud_ewt", write(tmp_path, "v1.conllu", text), tmp_path / "v1.spacy")
    assert [t.pos_ for t in read_docs(tmp_path / "v1.spacy")[0]] == ["NOUN", "CONJ"]


def test_bom_is_dropped_and_other_encodings_are_named(tmp_path, capsys):
    bom = tmp_path / "bom.txt"
    bom.write_bytes(b"\xef\xbb\xbf" + CONLL2003.encode())
    stats = convert_file("conll2003", bom, tmp_path / "bom.spacy")
    assert stats.sentences == 2 and stats.skipped_lines == 2
    latin = tmp_path / "latin.txt"
    latin.write_bytes("a _ _ O\n\nM\u00fcller _ _ B-PER\n".encode("latin-1"))
    with pytest.raises(ConvertError, match=r"latin.txt:3: not utf-8 text \(byte 0xfc"):
        convert_file("conll2003", latin, tmp_path / "latin.spacy")
    assert cli(["convert", "conll2003", str(latin), str(tmp_path / "l.spacy"), "--encoding", "latin-1"]) == 0
    assert [t.text for t in read_docs(tmp_path / "l.spacy")[1]] == ["M\u00fcller"]
    binary = tmp_path / "model.bin"
    binary.write_bytes(b"\x00\x01\x02 abc\n")
    assert cli(["convert", "conll2003", str(binary), str(tmp_path / "b.spacy")]) == 1
    assert "model.bin:1: a NUL byte: this is not a text file" in capsys.readouterr().err
    assert cli(["convert", "conll2003", str(write(tmp_path, "empty.txt", "\n\n")), str(tmp_path / "e.spacy")]) == 1
    assert "empty.txt: no sentences found" in capsys.readouterr().err


def test_bad_outputs_and_counts_fail_up_front(tmp_path, capsys):
    path = write(tmp_path, "in.txt", CONLL2003)
    (tmp_path / "folder").mkdir()
    assert cli(["convert", "conll2003", str(path), str(tmp_path / "folder")]) == 1
    assert "folder: exists and is a folder; give a .spacy file" in capsys.readouterr().err
    assert cli(["convert", "conll2003", str(path), str(path / "x.spacy")]) == 1
    assert f"cannot be written: {path} is a file, not a folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        convert_cli(["conll2003", str(path), str(tmp_path / "x.spacy"), "--max-sentences", "-1"])
    assert "--max-sentences must be 0 (all) or more, got -1" in capsys.readouterr().err
    with pytest.raises(ElmoInputError, match="max_sentences must be a whole number"):
        convert_file("conll2003", path, tmp_path / "x.spacy", max_sentences=-2)
    assert not (tmp_path / "x.spacy").exists()


def test_limit_train_zero_means_all(tmp_path):
    data = tmp_path / "ud"
    data.mkdir()
    for split in ("train", "dev", "test"):
        write(data, f"en_x-ud-{split}.conllu", "\n".join([CONLLU] * 3))
    stats = convert_dataset("ud_ewt", data, tmp_path / "corpus", limit_train=0, max_sentences=0)
    assert {s: st.sentences for s, st in stats.items()} == {"train": 6, "dev": 6, "test": 6}
