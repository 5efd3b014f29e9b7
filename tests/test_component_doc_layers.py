"""What travels with the docs after the pipeline: ``keep_layers`` reduces ``doc._.elmo_layers`` once
every listening component has read them, and a component that writes no tensor says why vectors
are empty."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import spacy
from spacy.tokens import DocBin
from thinc.api import Config, fix_random_seed

from elmo_testing import CONFIGS, conll_examples, elmo_only_nlp
from spacy_elmo_mix.errors import ElmoConfigError

TEXTS = ["The cat sat on the mat .", "EU rejects German call to boycott British lamb .", "Peter Blackburn"]


def listening_nlp(model_files, examples, keep_layers=None):
    """An initialized elmo + crf_ner pipeline (the shipped config, a one-layer BiLSTM of 16 units)."""
    config = Config().from_disk(CONFIGS / "crf_ner.cfg", interpolate=False)
    config["paths"]["elmo_options"], config["paths"]["elmo_weights"] = map(str, model_files)
    config = config.interpolate()
    config["components"]["crf_ner"]["model"]["tok2vec"].update({"width": 16, "depth": 1})
    if keep_layers is not None:
        config["components"]["elmo"]["keep_layers"] = keep_layers
    fix_random_seed(0)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    nlp.initialize(lambda: examples)
    return nlp


@pytest.fixture(scope="module")
def examples(data_dir):
    return conll_examples(data_dir / "conll2003" / "train.txt", 8)


def computed(nlp):
    """The float32 layers the pipeline's elmo component computes for TEXTS (one batch, as nlp.pipe)."""
    return [np.asarray(layers) for layers in nlp.get_pipe("elmo").predict([nlp.make_doc(t) for t in TEXTS])]


def _ents(docs):
    return [[(e.start, e.end, e.label_) for e in doc.ents] for doc in docs]


def test_listened_layers_are_dropped_by_default_after_the_listeners_read_them(tiny_model_files, examples):
    nlp = listening_nlp(tiny_model_files, examples)
    assert nlp.get_pipe("elmo").keep_layers == "auto"
    docs = list(nlp.pipe(TEXTS))
    assert all(doc._.elmo_layers is None for doc in docs)
    # The listener read the full layers first: the same entities as when they are all kept.
    keeping = listening_nlp(tiny_model_files, examples, "float32")
    kept = list(keeping.pipe(TEXTS))
    assert _ents(docs) == _ents(kept)
    for doc, ref in zip(kept, computed(keeping)):
        np.testing.assert_array_equal(doc._.elmo_layers, ref)


def test_float16_keeps_a_half_size_copy(tiny_model_files, examples):
    nlp = listening_nlp(tiny_model_files, examples, "float16")
    docs = list(nlp.pipe(TEXTS))
    for doc, ref in zip(docs, computed(nlp)):
        assert doc._.elmo_layers.dtype == np.float16
        np.testing.assert_array_equal(doc._.elmo_layers, ref.astype(np.float16))


def test_a_docbin_of_listened_docs_is_small(tiny_model_files, examples):
    nlp = listening_nlp(tiny_model_files, examples)
    sizes = {}
    for keep in ("float32", "float16", "auto"):
        nlp.get_pipe("elmo").keep_layers = keep
        texts = [eg.reference.text for eg in examples]
        sizes[keep] = len(DocBin(store_user_data=True, docs=nlp.pipe(texts)).to_bytes())
    # 8 sentences of CoNLL-2003 (about 100 tokens) x 3 layers x 32 dims: about 40 KB of float32
    # layers (DocBin compresses them little), 1-2 KB for the docs themselves.
    assert sizes["auto"] * 5 < sizes["float16"] < sizes["float32"]


def test_a_disabled_listener_leaves_the_layers(tiny_model_files, examples):
    nlp = listening_nlp(tiny_model_files, examples)
    with nlp.select_pipes(disable=["crf_ner"]):
        docs = list(nlp.pipe(TEXTS))
    for doc, ref in zip(docs, computed(nlp)):
        np.testing.assert_array_equal(doc._.elmo_layers, ref)


def test_without_listeners_the_layers_are_the_output(tiny_model_files):
    reference = elmo_only_nlp(tiny_model_files)(TEXTS[0])._.elmo_layers  # auto: kept
    assert reference is not None
    nlp = spacy.blank("en")
    options, weights = tiny_model_files
    nlp.add_pipe(
        "elmo", config={"keep_layers": "none", "model": {"options_file": str(options), "weight_file": str(weights)}}
    )
    nlp.initialize()
    doc = nlp(TEXTS[0])
    assert doc._.elmo_layers is None
    # doc.tensor (the component's own scheme) is still there.
    # float32 mean of 3 values: within a few ulps of the float64 mean
    np.testing.assert_allclose(doc.tensor, reference.astype(np.float64).mean(axis=0), rtol=1e-6, atol=1e-6)


def test_keep_layers_is_checked():
    with pytest.raises(ElmoConfigError, match="keep_layers = 'half'"):
        spacy.blank("en").add_pipe("elmo", config={"keep_layers": "half"})


def test_no_tensor_says_why_vectors_are_empty_and_how_to_get_them(tiny_model_files, examples, tmp_path):
    nlp = listening_nlp(tiny_model_files, examples)
    assert nlp.get_pipe("elmo").set_tensor is False  # as in the shipped configs
    a, b = nlp.pipe(TEXTS[:2])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert a[0].vector.shape == (0,) and not a.has_vector
        assert a.similarity(b) == 0.0
    messages = {str(w.message) for w in caught}
    assert messages and all("set_tensor" in m and "spacy.load" in m for m in messages)
    # The fix the message gives works.
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline", config={"components": {"elmo": {"set_tensor": True}}})
    a, b = loaded.pipe(TEXTS[:2])
    assert a.has_vector and a[0].vector.shape == (32,)
    assert 0.0 < a.similarity(b) <= 1.0
    assert _ents([a, b]) == _ents(nlp.pipe(TEXTS[:2]))
