"""The ``elmo`` component: annotations, listeners, layer skipping, serialization, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc, DocBin
from spacy.training import Example
from thinc.api import fix_random_seed

from elmo_testing import conll_examples, elmo_only_nlp, small_config, tagged_examples
from spacy_elmo_mix import ElmoEmbedder
from spacy_elmo_mix.errors import ElmoConfigError, ElmoFileError

TEXT = "The cat sat on the mat. It was happy."


@pytest.fixture
def elmo_nlp(tiny_model_files):
    return elmo_only_nlp(tiny_model_files)


def test_layers_and_tensor_match_embedder(elmo_nlp, tiny_model_files):
    doc = elmo_nlp(TEXT)
    expected = ElmoEmbedder(*tiny_model_files).embed_sentence([t.text for t in doc])
    assert doc._.elmo_layers.shape == (3, len(doc), 32)
    np.testing.assert_allclose(doc._.elmo_layers, expected, atol=1e-6)
    # Default scheme: fixed average of all layers.
    np.testing.assert_allclose(doc.tensor, expected.mean(axis=0), atol=1e-6)
    np.testing.assert_allclose(doc[2].vector, doc.tensor[2])
    np.testing.assert_allclose(doc.vector, doc.tensor.mean(axis=0), atol=1e-6)
    assert -1.0 <= doc[1].similarity(doc[8]) <= 1.0
    assert doc.similarity(doc) == pytest.approx(1.0)


def test_sentences_are_processed_separately(elmo_nlp, tiny_model_files):
    doc = elmo_nlp.make_doc(TEXT)
    for i, token in enumerate(doc):
        token.is_sent_start = i in (0, 7)
    doc = elmo_nlp(doc)
    embedder = ElmoEmbedder(*tiny_model_files)
    expected = np.concatenate([embedder.embed_sentence([t.text for t in s]) for s in doc.sents], axis=1)
    np.testing.assert_allclose(doc._.elmo_layers, expected, atol=1e-6)


def test_pipe_batch_size_does_not_change_vectors(elmo_nlp, data_dir):
    texts = [" ".join(eg.reference.text.split()) for eg in conll_examples(data_dir / "conll2003" / "valid.txt", 70)]
    one = [doc._.elmo_layers for doc in elmo_nlp.pipe(texts, batch_size=1)]
    many = [doc._.elmo_layers for doc in elmo_nlp.pipe(texts, batch_size=64)]
    assert len(one) == len(many) == 70
    for a, b in zip(one, many):
        np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "\n\n\t",
        "a " + "x" * 500 + " b",
        "I love 🍕 and 🤖 😀!",
        "control\x00chars\x07here\x1b",
        "日本語のテキスト",
    ],
)
def test_bad_input_texts(elmo_nlp, text):
    doc = elmo_nlp(text)
    assert doc._.elmo_layers.shape == (3, len(doc), 32)
    assert doc.tensor.shape == (len(doc), 32)
    assert np.isfinite(doc._.elmo_layers).all()


def test_long_doc_without_sentences_is_windowed(elmo_nlp):
    words = ["word"] * 10_000
    doc = elmo_nlp(Doc(elmo_nlp.vocab, words=words))
    assert doc._.elmo_layers.shape == (3, 10_000, 32)
    window = elmo_nlp.get_pipe("elmo").model.attrs["settings"]["max_length"]
    # Each window starts from a zero state: the first token of every window looks the same.
    np.testing.assert_allclose(doc._.elmo_layers[:, 0], doc._.elmo_layers[:, window], atol=1e-6)


def test_docbin_keeps_layers(elmo_nlp):
    doc = elmo_nlp(TEXT)
    restored = list(DocBin(docs=[doc], store_user_data=True).get_docs(elmo_nlp.vocab))[0]
    np.testing.assert_array_equal(restored._.elmo_layers, doc._.elmo_layers)


def test_top_lstm_not_run_when_no_scheme_uses_it(tiny_model_files, lstm_calls):
    nlp = elmo_only_nlp(
        tiny_model_files, {"@layers": "spacy-elmo-mix.ScalarMix.v1", "layers": [0, 1], "trainable": False}
    )
    bilm = nlp.get_pipe("elmo").model.shims[0]._model
    lstm_calls.clear()
    doc = nlp(TEXT)
    assert doc._.elmo_layers.shape[0] == 2
    top_layers = {id(bilm.stacks[0][1]), id(bilm.stacks[1][1])}
    assert lstm_calls and not top_layers & {id(c.layer) for c in lstm_calls}


def test_listeners_decide_the_top_layer(tiny_model_files, data_dir, lstm_calls):
    config = small_config("ner.cfg", *tiny_model_files, scheme="weighted12")
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    examples = conll_examples(data_dir / "conll2003" / "train.txt", 8, nlp)
    nlp.initialize(lambda: examples)
    bilm = nlp.get_pipe("elmo").model.shims[0]._model
    lstm_calls.clear()
    nlp.update(examples)
    nlp("Peter lives in Berlin .")
    assert lstm_calls and not {id(bilm.stacks[0][1]), id(bilm.stacks[1][1])} & {id(c.layer) for c in lstm_calls}


def test_scheme_with_missing_layer_fails_at_initialize(tiny_model_files, tmp_path):
    import h5py

    options, weights = tiny_model_files
    one_layer = json.loads(options.read_text())
    one_layer["lstm"]["n_layers"] = 1
    (tmp_path / "options.json").write_text(json.dumps(one_layer))
    with h5py.File(weights) as src, h5py.File(tmp_path / "weights.hdf5", "w") as dst:
        for name in src:
            src.copy(src[name], dst, name)
        for d in (0, 1):
            del dst[f"RNN_{d}/RNN/MultiRNNCell/Cell1"]
    config = small_config("ner.cfg", tmp_path / "options.json", tmp_path / "weights.hdf5", scheme="layer3")
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    with pytest.raises(ElmoConfigError, match=r"layer 2 \(paper name: layer 3\).*offers layers 0\.\.1"):
        nlp.initialize(lambda: [_example(nlp)])


def _example(nlp) -> Example:
    words = ["Peter", "lives", "in", "Berlin"]
    return Example(Doc(nlp.vocab, words=words), Doc(nlp.vocab, words=words, ents=["B-PER", "O", "O", "B-LOC"]))


@pytest.mark.parametrize("corrupt", ["missing", "truncated"])
def test_bad_weight_file_names_the_file(tiny_model_files, tmp_path, corrupt):
    options, weights = tiny_model_files
    bad = tmp_path / "weights.hdf5"
    if corrupt == "truncated":
        data = weights.read_bytes()
        bad.write_bytes(data[: len(data) // 2])
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": {"options_file": str(options), "weight_file": str(bad)}})
    with pytest.raises(ElmoFileError, match=str(bad)):
        nlp.initialize()


def test_two_listeners_share_one_component(tiny_model_files, data_dir):
    config = small_config("ner.cfg", *tiny_model_files)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    tagger_config = small_config("tagger.cfg", *tiny_model_files, scheme="weighted12")["components"]["tagger"]
    nlp.add_pipe("tagger", config={k: v for k, v in tagger_config.items() if k != "factory"})
    ner_examples = conll_examples(data_dir / "conll2003" / "train.txt", 12, nlp)
    tags = tagged_examples(ner_examples)
    examples = [Example(eg.predicted, _merge(eg.reference, tag.reference)) for eg, tag in zip(ner_examples, tags)]
    nlp.initialize(lambda: examples)
    elmo = nlp.get_pipe("elmo")
    assert elmo.listening_components == ["ner", "tagger"]
    losses = {}
    for _ in range(3):
        nlp.update(examples, losses=losses)
    assert losses["ner"] > 0 and losses["tagger"] > 0
    doc = nlp("Peter lives in Berlin .")
    assert all(t.tag_ for t in doc)


def _merge(ner_doc: Doc, tag_doc: Doc) -> Doc:
    words = [t.text for t in ner_doc]
    ents = [f"{t.ent_iob_}-{t.ent_type_}" if t.ent_type_ else "O" for t in ner_doc]
    return Doc(ner_doc.vocab, words=words, ents=ents, tags=[t.tag_ for t in tag_doc])


@pytest.mark.parametrize("frozen", [True, False])
def test_frozen_keeps_bilm_weights(tiny_model_files, data_dir, frozen):
    config = small_config("ner.cfg", *tiny_model_files, frozen=frozen)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    examples = conll_examples(data_dir / "conll2003" / "train.txt", 8, nlp)
    optimizer = nlp.initialize(lambda: examples)
    bilm = nlp.get_pipe("elmo").model.shims[0]._model
    before = {k: v.clone() for k, v in bilm.state_dict().items()}
    for _ in range(2):  # the parser's zero-initialized output layer passes no gradient at step 1
        nlp.update(examples, sgd=optimizer)
    changed = [k for k, v in bilm.state_dict().items() if not np.array_equal(v.numpy(), before[k].numpy())]
    if frozen:
        assert changed == []
    else:
        assert any("stacks" in k for k in changed) and any("char_cnn" in k for k in changed)


@pytest.mark.parametrize("config_name", ["ner.cfg", "ner_elmo_hash.cfg"])
def test_replace_listeners_keeps_predictions(tiny_model_files, data_dir, config_name):
    """Also with ElmoTok2Vec.v2, whose listener sits inside a chain with the scaling layer."""
    fix_random_seed(0)
    config = small_config(config_name, *tiny_model_files)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    examples = conll_examples(data_dir / "conll2003" / "train.txt", 8, nlp)
    nlp.initialize(lambda: examples)
    for _ in range(2):
        nlp.update(examples)
    texts = [eg.reference.text for eg in examples]
    before = [[(e.start, e.end, e.label_) for e in d.ents] for d in nlp.pipe(texts)]
    nlp.replace_listeners("elmo", "ner", ["model.tok2vec.elmo"])
    assert nlp.get_pipe("elmo").listening_components == []
    nlp.remove_pipe("elmo")
    after = [[(e.start, e.end, e.label_) for e in d.ents] for d in nlp.pipe(texts)]
    assert before == after
    assert (
        nlp.config["components"]["ner"]["model"]["tok2vec"]["elmo"]["@architectures"] == "spacy-elmo-mix.ElmoInline.v1"
    )


def test_bilstm_encoder_and_hash_embeddings_train(tiny_model_files, data_dir):
    """The paper-like setup: ELMo + spaCy's hash embeddings into a BiLSTM encoder."""
    config = small_config("ner_elmo_hash.cfg", *tiny_model_files)
    tok2vec = config["components"]["ner"]["model"]["tok2vec"]
    tok2vec["encoder"] = {"@architectures": "spacy.TorchBiLSTMEncoder.v1", "width": 32, "depth": 1, "dropout": 0.0}
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    examples = conll_examples(data_dir / "conll2003" / "train.txt", 8, nlp)
    optimizer = nlp.initialize(lambda: examples)
    losses = [nlp.update(examples, sgd=optimizer, losses={})["ner"] for _ in range(6)]
    assert losses[-1] < losses[1]
    names = [node.name for node in nlp.get_pipe("ner").model.walk()]
    assert "elmo_listener" in names and any("hashembed" in n for n in names) and any("pytorch" in n for n in names)


def test_an_argument_paragraph_longer_than_max_length_gets_every_tokens_vectors(tiny_model_files, data_dir, tmp_path):
    """A persuasive-essay paragraph (one doc, no sentence boundaries) longer than ``max_length`` is
    read in windows of ``max_length`` tokens: every token gets its layers, each window's as if alone."""
    from spacy_elmo_mix.workflow.convert import convert_file

    convert_file("arguments", data_dir / "arguments" / "dev.dat", tmp_path / "dev.spacy")
    docs = list(DocBin().from_disk(tmp_path / "dev.spacy").get_docs(spacy.blank("en").vocab))
    paragraph = max(docs, key=len)
    window = 64
    assert len(paragraph) > 2 * window
    nlp = elmo_only_nlp(tiny_model_files, max_length=window)
    doc = nlp(Doc(nlp.vocab, words=[t.text for t in paragraph]))
    layers = doc._.elmo_layers
    assert layers.shape == (3, len(paragraph), 32) and (np.abs(layers).sum(axis=(0, 2)) > 0).all()
    second = nlp(Doc(nlp.vocab, words=[t.text for t in paragraph[window : 2 * window]]))
    np.testing.assert_allclose(
        layers[:, window : 2 * window], second._.elmo_layers, atol=1e-6
    )  # as test_long_doc_without_sentences_is_windowed
