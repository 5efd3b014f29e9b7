"""Pipelines with the elmo component survive to_bytes/from_bytes and to_disk/spacy.load,
before and after initialize, with the biLM stored inside (no original files needed).

The layer cache is off here: outputs are compared bit for bit, and a cached sentence computed in
another batch may differ in the last float32 bits."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import spacy
from thinc.api import fix_random_seed

from elmo_testing import conll_examples, elmo_only_nlp, small_config


def _ner_scores(nlp, texts):
    """The NER model's tok2vec output: a sensitive check that every learned weight survived."""
    docs = list(nlp.pipe(texts, disable=["ner"]))
    tok2vec = nlp.get_pipe("ner").model.get_ref("tok2vec")
    return [np.asarray(y) for y in tok2vec.predict(docs)]


# ner_elmo_hash.cfg: ElmoTok2Vec.v2, whose learned ELMo scale must survive too.
CONFIG_NAMES = ["ner.cfg", "ner_elmo_hash.cfg"]


@pytest.fixture(params=CONFIG_NAMES)
def trained(tiny_model_files, data_dir, request):
    fix_random_seed(0)
    nlp = spacy.util.load_model_from_config(
        small_config(request.param, *tiny_model_files, scheme="weighted", cache_memory_mb=0), auto_fill=True
    )
    examples = conll_examples(data_dir / "conll2003" / "train.txt", 8, nlp)
    nlp.initialize(lambda: examples)
    for _ in range(3):
        nlp.update(examples)
    return nlp, [eg.reference.text for eg in examples]


def _assert_same(nlp_a, nlp_b, texts):
    for a, b in zip(_ner_scores(nlp_a, texts), _ner_scores(nlp_b, texts)):
        np.testing.assert_array_equal(a, b)

    def ents(nlp):
        return [[(e.start, e.end, e.label_) for e in d.ents] for d in nlp.pipe(texts)]

    assert ents(nlp_a) == ents(nlp_b)


def test_bytes_round_trip_after_initialize(trained):
    nlp, texts = trained
    clone = spacy.util.load_model_from_config(nlp.config, auto_fill=False)
    clone.from_bytes(nlp.to_bytes())
    _assert_same(nlp, clone, texts)


def test_disk_round_trip_needs_no_original_files(trained, tiny_model_files, tmp_path):
    nlp, texts = trained
    # The saved config points at files that no longer exist: loading must not read them.
    fake = tmp_path / "gone"
    nlp.to_disk(tmp_path / "pipeline")
    config = spacy.util.load_config(tmp_path / "pipeline" / "config.cfg", interpolate=False)
    config["components"]["elmo"]["model"]["options_file"] = str(fake / "options.json")
    config["components"]["elmo"]["model"]["weight_file"] = str(fake / "weights.hdf5")
    config.to_disk(tmp_path / "pipeline" / "config.cfg")
    loaded = spacy.load(tmp_path / "pipeline")
    _assert_same(nlp, loaded, texts)


@pytest.mark.parametrize("config_name", CONFIG_NAMES)
def test_round_trip_before_initialize(tiny_model_files, data_dir, tmp_path, config_name):
    config = small_config(config_name, *tiny_model_files, cache_memory_mb=0)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    via_bytes = spacy.util.load_model_from_config(nlp.config, auto_fill=False)
    via_bytes.from_bytes(nlp.to_bytes())
    nlp.to_disk(tmp_path / "uninitialized")
    via_disk = spacy.util.load_model_from_config(nlp.config, auto_fill=False)
    via_disk.from_disk(tmp_path / "uninitialized")
    examples = conll_examples(data_dir / "conll2003" / "train.txt", 4, nlp)
    texts = [eg.reference.text for eg in examples]
    results = []
    for pipeline in (nlp, via_bytes, via_disk):
        fix_random_seed(1)
        pipeline.initialize(lambda: examples)
        results.append(_ner_scores(pipeline, texts))
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)


def test_elmo_alone_round_trip(tiny_model_files, tmp_path):
    scheme = {
        "@layers": "spacy-elmo-mix.ScalarMix.v1",
        "layers": [1, 2],
        "initial_weights": [0.25, 0.75],
        "trainable": False,
    }
    nlp = elmo_only_nlp(tiny_model_files, scheme)
    nlp.to_disk(tmp_path / "elmo_only")
    loaded = spacy.load(tmp_path / "elmo_only")
    text = "Bytes and disks keep the same vectors ."
    np.testing.assert_array_equal(nlp(text).tensor, loaded(text).tensor)
    np.testing.assert_array_equal(nlp(text)._.elmo_layers, loaded(text)._.elmo_layers)


@pytest.fixture(scope="module")
def saved_elmo(tiny_model_files, tmp_path_factory):
    path = tmp_path_factory.mktemp("saved") / "pipeline"
    elmo_only_nlp(tiny_model_files, cache_memory_mb=0).to_disk(path)
    return path


def _damaged_copy(saved, tmp_path, name, damage):
    copy = tmp_path / "pipeline"
    shutil.copytree(saved, copy)
    target = copy / "elmo" / name
    damage(target)
    return copy, target


def _flip_middle_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "name, damage, message",
    [
        ("model", _flip_middle_byte, "checksum mismatch"),
        ("model", lambda p: p.unlink(), "is missing"),
        ("scheme", lambda p: p.write_bytes(b""), "is empty"),
        ("cfg", lambda p: p.write_bytes(b"\x93garbled{"), "is damaged"),
        ("scheme", lambda p: p.write_bytes(b"\x81\xa3abc\x01"), "is damaged"),
        ("model", lambda p: p.write_bytes(p.read_bytes()[:1000]), "is damaged"),
    ],
)
def test_damaged_component_files_are_named(saved_elmo, tmp_path, name, damage, message):
    from spacy_elmo_mix.errors import ElmoFileError

    copy, target = _damaged_copy(saved_elmo, tmp_path, name, damage)
    with pytest.raises(ElmoFileError, match=message) as info:
        spacy.load(copy)
    assert str(target) in str(info.value)


def test_damaged_bytes_raise_the_package_error(saved_elmo):
    from spacy_elmo_mix.errors import ElmoFileError

    nlp = spacy.load(saved_elmo)
    data = bytearray(nlp.get_pipe("elmo").to_bytes())
    data[len(data) // 2] ^= 0x10
    with pytest.raises(ElmoFileError, match="serialized elmo component.*checksum mismatch"):
        nlp.get_pipe("elmo").from_bytes(bytes(data))
