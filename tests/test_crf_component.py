"""The CRF components (``crf_ner``, ``crf_tagger``) as spaCy components: trained by ``spacy train``
from the shipped configs, valid spans by construction, serialization before and after initialize,
listeners replaced by an inline biLM, sourced into another pipeline."""

from __future__ import annotations

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc
from spacy.training import Example

from elmo_testing import conll_examples, paper_config, tagged_examples, trained
from spacy_elmo_mix.errors import ElmoConfigError
from spacy_elmo_mix.tagging.tag_schemes import allowed_transitions


def spans(docs):
    return [[(e.start, e.end, e.label_) for e in doc.ents] for doc in docs]


@pytest.fixture(scope="module")
def ner_examples(data_dir):
    return conll_examples(data_dir / "conll2003" / "train.txt", 16)


def test_spacy_train_runs_the_shipped_paper_config(tiny_model_files, data_dir, tmp_path):
    from spacy.cli.train import train

    from spacy_elmo_mix.workflow.convert import convert_dataset

    convert_dataset("conll2003", data_dir / "conll2003", tmp_path / "corpus", max_sentences=40)
    config = paper_config("crf_ner.cfg", tiny_model_files)
    config["training"].update({"max_epochs": 2, "eval_frequency": 2, "patience": 0})
    config.to_disk(tmp_path / "config.cfg")
    paths = {
        "paths.train": str(tmp_path / "corpus" / "train.spacy"),
        "paths.dev": str(tmp_path / "corpus" / "dev.spacy"),
    }
    paths.update({f"corpora.{split}.path": paths[f"paths.{split}"] for split in ("train", "dev")})
    train(tmp_path / "config.cfg", tmp_path / "out", overrides=paths, use_gpu=-1)
    nlp = spacy.load(tmp_path / "out" / "model-best")
    assert nlp.pipe_names == ["elmo", "crf_ner"]
    assert set(nlp.get_pipe("crf_ner").labels) == {"LOC", "MISC", "ORG", "PER"}
    assert "ents_f" in nlp.meta["performance"]
    assert isinstance(nlp("EU rejects German call to boycott British lamb .").ents, tuple)


def test_decoded_spans_are_always_valid(tiny_model_files, ner_examples):
    """Untrained and briefly trained, BIO and BILOU: every decoded tag sequence is well-formed."""
    for tag_scheme in ("BIO", "BILOU"):
        config = paper_config("crf_ner.cfg", tiny_model_files)
        config["components"]["crf_ner"]["tag_scheme"] = tag_scheme
        nlp = trained(config, ner_examples, steps=1)
        crf = nlp.get_pipe("crf_ner")
        start, moves, end = allowed_transitions(crf.tag_names, tag_scheme)
        # random emissions far larger than any learned scores: constraints alone keep paths valid
        rng = np.random.default_rng(0)
        emissions = [rng.normal(0, 50, (n, len(crf.tag_names))).astype("f") for n in (1, 2, 7, 30)]
        from spacy_elmo_mix.layers.crf_layer import crf_decode

        for path in crf_decode(crf.model.get_ref("crf"), emissions):
            assert start[path[0]] and end[path[-1]] and all(moves[a, b] for a, b in zip(path[:-1], path[1:]))
        docs = list(nlp.pipe([eg.reference.text for eg in ner_examples]))
        assert all(ent.label_ in crf.labels for doc in docs for ent in doc.ents)


def test_crf_ner_learns_and_round_trips(tiny_model_files, ner_examples, tmp_path):
    nlp = trained(paper_config("crf_ner.cfg", tiny_model_files, width=32), ner_examples, steps=80)
    scores = nlp.evaluate(ner_examples)
    assert scores["ents_f"] > 0.6  # memorizes 16 sentences
    texts = [eg.reference.text for eg in ner_examples]
    before = spans(nlp.pipe(texts))
    nlp.to_disk(tmp_path / "nlp")
    loaded = spacy.load(tmp_path / "nlp")
    assert spans(loaded.pipe(texts)) == before
    emissions = [
        nlp.get_pipe("crf_ner").model.predict([d]) for d in (nlp.make_doc(texts[0]), loaded.make_doc(texts[0]))
    ]
    np.testing.assert_array_equal(emissions[0][0], emissions[1][0])
    assert spans(spacy.blank("en").from_config(nlp.config).from_bytes(nlp.to_bytes()).pipe(texts)) == before


def test_crf_tagger_learns_tags_and_round_trips(tiny_model_files, ner_examples, tmp_path):
    examples = tagged_examples(ner_examples)
    nlp = trained(paper_config("crf_tagger.cfg", tiny_model_files, width=32), examples, steps=30)
    assert nlp.evaluate(examples)["tag_acc"] > 0.8
    texts = [eg.reference.text for eg in examples]
    before = [[t.tag_ for t in doc] for doc in nlp.pipe(texts)]
    nlp.to_disk(tmp_path / "nlp")
    assert [[t.tag_ for t in doc] for doc in spacy.load(tmp_path / "nlp").pipe(texts)] == before


def test_serialization_before_initialize(tiny_model_files, ner_examples):
    config = paper_config("crf_ner.cfg", tiny_model_files)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    fresh = spacy.util.load_model_from_config(config, auto_fill=True).from_bytes(nlp.to_bytes())
    fresh.initialize(lambda: ner_examples)
    assert set(fresh.get_pipe("crf_ner").labels) == {"LOC", "MISC", "ORG", "PER"}
    fresh.update(ner_examples)


def test_replace_listeners_keeps_predictions(tiny_model_files, ner_examples):
    nlp = trained(paper_config("crf_ner.cfg", tiny_model_files), ner_examples, steps=5)
    texts = [eg.reference.text for eg in ner_examples]
    before = spans(nlp.pipe(texts))
    nlp.replace_listeners("elmo", "crf_ner", ["model.tok2vec.elmo"])
    nlp.remove_pipe("elmo")
    assert spans(nlp.pipe(texts)) == before
    assert (
        nlp.config["components"]["crf_ner"]["model"]["tok2vec"]["elmo"]["@architectures"]
        == "spacy-elmo-mix.ElmoInline.v1"
    )


def test_sourced_crf_component_predicts_the_same(tiny_model_files, ner_examples, tmp_path):
    nlp = trained(paper_config("crf_ner.cfg", tiny_model_files), ner_examples, steps=5)
    nlp.to_disk(tmp_path / "source")
    other = spacy.blank("en")
    source = spacy.load(tmp_path / "source")
    other.add_pipe("elmo", source=source)
    other.add_pipe("crf_ner", source=source)
    texts = [eg.reference.text for eg in ner_examples]
    assert spans(other.pipe(texts)) == spans(nlp.pipe(texts))


def test_baseline_config_needs_no_elmo(data_dir, ner_examples):
    nlp = trained(paper_config("crf_ner_baseline.cfg", (None, None)), ner_examples, steps=2)
    assert nlp.pipe_names == ["crf_ner"]
    assert nlp.evaluate(ner_examples)["ents_f"] is not None


def test_empty_docs_and_unknown_gold_tags(tiny_model_files, ner_examples):
    """A batch with an empty doc trains and predicts; a token without gold tag is learned as unknown."""
    nlp = trained(paper_config("crf_ner.cfg", tiny_model_files), ner_examples, steps=1)
    empty = Example(Doc(nlp.vocab, words=[]), Doc(nlp.vocab, words=[]))
    words = ["Peter", "Blackburn", "visited", "Paris"]
    partial = Example(Doc(nlp.vocab, words=words), Doc(nlp.vocab, words=words, ents=["B-PER", "I-PER", "", "B-LOC"]))
    losses = nlp.update([empty, partial, *ner_examples[:2]])
    assert np.isfinite(losses["crf_ner"]) and losses["crf_ner"] > 0
    docs = list(nlp.pipe(["", "Peter Blackburn"]))
    assert len(docs[0]) == 0 and docs[0].ents == ()


def test_bad_settings_fail_loudly(tiny_model_files, ner_examples):
    config = paper_config("crf_ner.cfg", tiny_model_files)
    config["components"]["crf_ner"]["tag_scheme"] = "IOB1"
    with pytest.raises(ValueError, match="tag_scheme"):
        spacy.util.load_model_from_config(config, auto_fill=True)
    config = paper_config("crf_ner.cfg", tiny_model_files)
    config["components"]["crf_ner"]["model"]["tok2vec"]["dropout"] = 1.0
    with pytest.raises(ValueError, match="dropout"):
        spacy.util.load_model_from_config(config, auto_fill=True)
    config = paper_config("crf_ner_baseline.cfg", (None, None))
    del config["components"]["crf_ner"]["model"]["tok2vec"]["embed"]
    config["components"]["crf_ner"]["model"]["tok2vec"]["embed"] = None
    with pytest.raises(ElmoConfigError, match="features"):
        spacy.util.load_model_from_config(config, auto_fill=True)
    nlp = trained(paper_config("crf_ner.cfg", tiny_model_files), ner_examples, steps=0)
    with pytest.raises(ValueError, match="after initialize"):
        nlp.get_pipe("crf_ner").add_label("NEW")


def _aligned_gold(component, eg):
    """The gold indices through spaCy's alignment (the general path)."""
    index = {name: i for i, name in enumerate(component.tag_names)}
    if component.cfg["target"] == "tags":
        tags = eg.get_aligned("TAG", as_string=True)
    else:
        tags = [component._from_biluo(tag) for tag in eg.get_aligned_ner()]
    return np.array([index.get(tag, -1) if tag else -1 for tag in tags], dtype="int32")


@pytest.mark.parametrize("factory,scheme", [("crf_ner", "BIO"), ("crf_ner", "BILOU"), ("crf_tagger", None)])
def test_gold_of_given_tokens_equals_the_aligned_gold(data_dir, factory, scheme):
    """The fast path for examples whose docs share their tokens reads what spaCy's alignment reads,
    on 400 CoNLL-2003 sentences, with part of some sentences' annotation missing (unknown there)
    and whitespace tokens; examples with other tokens take the alignment path."""
    from spacy.tokens import Span

    from spacy_elmo_mix.crf_component import _same_tokens

    nlp = spacy.blank("en")
    examples = conll_examples(data_dir / "conll2003" / "train.txt", 400, nlp)
    if factory == "crf_tagger":
        examples = tagged_examples(examples)
    for eg in examples[::9]:  # missing annotation at the end of every 9th sentence
        ref = eg.reference
        if factory == "crf_ner" and len(ref) > 3:
            keep = [e for e in ref.ents if e.end <= len(ref) - 2]
            ref.set_ents(keep, missing=[Span(ref, len(ref) - 2, len(ref))], default="unmodified")
        elif factory == "crf_tagger":
            ref[-1].tag_ = ""
    words = ["New", "\n", "York", "is", "big"]  # a whitespace token without annotation counts as O
    gold = (
        {"tags": ["B-LOC", "", "B-LOC", "O", "O"]}
        if factory == "crf_tagger"
        else {"ents": ["B-LOC", None, "B-LOC", "O", "O"]}
    )
    ref = Doc(nlp.vocab, words=words, spaces=[True, False, True, True, False], **gold)
    examples.append(Example(Doc(nlp.vocab, words=words, spaces=[True, False, True, True, False]), ref))
    component = nlp.add_pipe(factory, config={"tag_scheme": scheme} if scheme else {})
    for eg in examples:  # the labels, without building the network (no biLM needed here)
        for label in (
            {e.label_ for e in eg.reference.ents} if factory == "crf_ner" else {t.tag_ for t in eg.reference if t.tag_}
        ):
            component.add_label(label)
    unknown = 0
    for eg in examples:
        assert _same_tokens(eg.predicted, eg.reference)
        fast = component._gold_indices(eg)
        assert fast.tolist() == _aligned_gold(component, eg).tolist(), [t.text for t in eg.reference]
        unknown += int((fast == -1).sum())
    assert unknown > 40  # the missing annotation is really there
    retokenized = Example(Doc(nlp.vocab, words=["NewYork", "is", "big"]), examples[-1].reference)
    assert not _same_tokens(retokenized.predicted, retokenized.reference)
    for words, spaces in ((["New", "York"], [False, False]), (["New York"], [False]), (["new", "York"], [True, False])):
        other = Doc(nlp.vocab, words=words, spaces=spaces)  # other whitespace, other split, other case
        assert not _same_tokens(other, Doc(nlp.vocab, words=["New", "York"], spaces=[True, False]))
    assert component._gold_indices(retokenized).tolist() == _aligned_gold(component, retokenized).tolist()


# ---------------------------------------------------------------------------------------------
# What a doc already has: entities from a ruler, tags, spans known to be wrong
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ner_pipeline(tiny_model_files, ner_examples):
    return trained(paper_config("crf_ner.cfg", tiny_model_files, width=32), ner_examples, steps=40)


def test_entities_before_crf_ner_are_kept(ner_pipeline, ner_examples):
    """An entity_ruler's spans stay as they were (labels the CRF knows and one it does not), the
    CRF labels the other tokens around them, and a kept span is not extended by the CRF."""
    nlp = ner_pipeline
    texts = [eg.reference.text for eg in ner_examples]
    alone = list(nlp.pipe(texts))
    doc = next(d for d in alone if len(d.ents) >= 2)
    first, second = doc.ents[0], doc.ents[1]
    known = "LOC" if first.label_ != "LOC" else "PER"
    # a one-token span of a label the CRF knows, inside the first entity's place, and a new label
    ruler_spans = [(first.start, first.start + 1, known), (second.start, second.end, "GADGET")]
    ruled = nlp.make_doc(doc.text)
    ruled.set_ents([spacy.tokens.Span(ruled, s, e, label=label) for s, e, label in ruler_spans])
    crf = nlp.get_pipe("crf_ner")
    result = crf(nlp.get_pipe("elmo")(ruled))
    got = [(e.start, e.end, e.label_) for e in result.ents]
    for span in ruler_spans:
        assert span in got
    assert all(e.start >= second.end or e.end <= second.start for e in result.ents if e.label_ != "GADGET")
    # without the ruler the same tokens are labelled otherwise: the kept spans did bind
    assert [(e.start, e.end, e.label_) for e in doc.ents] != got
    # a doc without entities decodes as before
    assert spans(nlp.pipe(texts)) == spans(alone)


def test_entity_ruler_then_crf_ner_in_one_pipeline(ner_pipeline):
    nlp = ner_pipeline
    ruler = nlp.add_pipe("entity_ruler", before="crf_ner")
    try:
        ruler.add_patterns([{"label": "GADGET", "pattern": "Germany"}])
        doc = nlp("Germany rejected the call by Peter Blackburn .")
        assert [(e.text, e.label_) for e in doc.ents if e.text == "Germany"] == [("Germany", "GADGET")]
    finally:
        nlp.remove_pipe("entity_ruler")


def test_crf_tagger_keeps_existing_tags_unless_overwrite(tiny_model_files, ner_examples):
    examples = tagged_examples(ner_examples)
    config = paper_config("crf_tagger.cfg", tiny_model_files, width=32)
    nlp = trained(config, examples, steps=20)
    text = examples[0].reference.text
    predicted = [t.tag_ for t in nlp(text)]
    tagger, elmo = nlp.get_pipe("crf_tagger"), nlp.get_pipe("elmo")
    other = next(tag for tag in tagger.labels if tag != predicted[0])
    doc = nlp.make_doc(text)
    doc[0].tag_ = other
    assert [t.tag_ for t in tagger(elmo(doc))][0] == other
    assert not tagger.overwrite
    config["components"]["crf_tagger"]["overwrite"] = True
    overwriting = spacy.util.load_model_from_config(config, auto_fill=True).from_bytes(nlp.to_bytes())
    doc = overwriting.make_doc(text)
    doc[0].tag_ = other
    doc = overwriting.get_pipe("crf_tagger")(overwriting.get_pipe("elmo")(doc))
    assert [t.tag_ for t in doc] == predicted
    config["components"]["crf_tagger"]["overwrite"] = "yes"
    with pytest.raises(Exception, match="overwrite"):
        spacy.util.load_model_from_config(config, auto_fill=True)


def test_incorrect_spans_key_takes_effect_in_the_loss(tiny_model_files, ner_examples):
    """With ``incorrect_spans_key``, a span marked wrong removes the sequences that start such an
    entity from the numerator of a partially annotated doc: its loss rises; unset, nothing changes."""
    config = paper_config("crf_ner.cfg", tiny_model_files)
    config["components"]["crf_ner"]["incorrect_spans_key"] = "wrong"
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    nlp.initialize(lambda: ner_examples)
    crf = nlp.get_pipe("crf_ner")
    words = ["Peter", "Blackburn", "went", "to", "Paris", "."]
    reference = Doc(nlp.vocab, words=words, ents=["", "", "O", "O", "", "O"])  # partly unknown
    eg = Example(nlp.make_doc(" ".join(words)), reference)
    emissions = crf.model.predict([eg.predicted])
    plain, _ = crf.get_loss([eg], emissions)
    reference.spans["wrong"] = [spacy.tokens.Span(reference, 0, 2, label="PER")]
    marked, _ = crf.get_loss([eg], emissions)
    assert marked > plain
    allowed = crf._not_incorrect(eg)
    assert not allowed[0, crf.tag_names.index("B-PER")] and allowed.sum() == allowed.size - 1
    config["components"]["crf_ner"]["incorrect_spans_key"] = ""
    with pytest.raises(Exception, match="incorrect_spans_key"):
        spacy.util.load_model_from_config(config, auto_fill=True)
