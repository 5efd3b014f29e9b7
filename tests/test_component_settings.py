"""Every biLM setting given when a pipeline is built or loaded takes effect; the saved bytes only
bring the biLM itself (options, weights), never the settings of the pipeline that was saved."""

from __future__ import annotations

import numpy as np
import pytest
import spacy
import torch
from spacy.training import Example

from elmo_testing import elmo_only_nlp
from spacy_elmo_mix.errors import ElmoConfigError
from spacy_elmo_mix.layers.bilm_model import get_bilm, layer_cache, settings

TEXT = "The cat sat on the mat and looked at the dog for a long time ."
LOAD_SETTINGS = {
    "compute_dtype": "bfloat16",
    "batch_size": 2,
    "max_length": 5,
    "cache_memory_mb": 0,
    "cache_dtype": "float16",
}


@pytest.fixture
def saved(tiny_model_files, tmp_path):
    """A pipeline saved with the defaults (float32, batch 64, max_length 256, 512 MiB cache)."""
    nlp = elmo_only_nlp(tiny_model_files, cache_memory_mb=512)
    nlp.to_disk(tmp_path / "pipeline")
    return nlp, tmp_path / "pipeline"


def _batch_sizes(nlp, texts):
    """The batch sizes of the biLM calls made while processing ``texts``."""
    bilm = get_bilm(nlp.get_pipe("elmo").model)
    sizes = []
    handle = bilm.register_forward_hook(lambda module, args, out: sizes.append(args[0].shape[0]))
    try:
        list(nlp.pipe(texts))
    finally:
        handle.remove()
    return sizes


@pytest.mark.filterwarnings("ignore:compute_dtype 'bfloat16' requested")
def test_settings_given_at_load_take_effect(saved, tiny_model_files):
    _, path = saved
    loaded = spacy.load(path, config={"components": {"elmo": {"model": LOAD_SETTINGS}}})
    model = loaded.get_pipe("elmo").model
    assert {k: settings(model)[k] for k in LOAD_SETTINGS} == LOAD_SETTINGS
    assert get_bilm(model).compute_dtype == torch.bfloat16
    assert layer_cache(model) is None
    # batch_size 2 and max_length 5: the 16-token text is cut into 4 windows, run 2 at a time.
    assert _batch_sizes(loaded, [TEXT]) == [2, 2]
    # The same as a pipeline built with these settings.
    built = elmo_only_nlp(tiny_model_files, **LOAD_SETTINGS)
    np.testing.assert_array_equal(loaded(TEXT)._.elmo_layers, built(TEXT)._.elmo_layers)


def test_cache_settings_given_at_load_take_effect(saved, tmp_path):
    _, path = saved
    cache = tmp_path / "loadcache"
    loaded = spacy.load(
        path, config={"components": {"elmo": {"model": {"cache_dir": str(cache), "cache_memory_mb": 1}}}}
    )
    loaded(TEXT)
    assert cache.is_dir() and any(cache.iterdir())
    assert layer_cache(loaded.get_pipe("elmo").model)._memory.budget_bytes == 2**20


def test_from_bytes_keeps_the_settings_of_the_receiving_pipeline(saved):
    nlp, _ = saved
    receiver = spacy.blank("en")
    receiver.add_pipe("elmo", config={"model": {"batch_size": 1, "max_length": 100, "cache_memory_mb": 0}})
    receiver.from_bytes(nlp.to_bytes())
    model = receiver.get_pipe("elmo").model
    assert (settings(model)["batch_size"], settings(model)["max_length"], settings(model)["cache_memory_mb"]) == (
        1,
        100,
        0,
    )
    assert _batch_sizes(receiver, [TEXT, "Two words"]) == [1, 1]
    np.testing.assert_array_equal(receiver(TEXT)._.elmo_layers, nlp(TEXT)._.elmo_layers)


def test_factory_declares_what_it_assigns():
    from spacy.language import Language

    spacy.blank("en")  # creating a pipeline loads the spacy_factories entry points, whatever test ran before
    assert set(Language.get_factory_meta("elmo").assigns) == {"doc._.elmo_layers", "doc.tensor"}


def test_training_cache_does_not_travel(tiny_model_files, data_dir, tmp_path, monkeypatch):
    """A cache set in [initialize.components.elmo] serves training only: the saved pipeline, loaded
    elsewhere, writes no cache folder and keeps no layers in memory."""
    from elmo_testing import conll_examples, small_config

    train_dir, elsewhere = tmp_path / "train", tmp_path / "elsewhere"
    train_dir.mkdir(), elsewhere.mkdir()
    monkeypatch.chdir(train_dir)
    config = small_config("ner.cfg", *tiny_model_files, cache_memory_mb=0)
    config["initialize"]["components"]["elmo"] = {
        "cache_dir": "traincache",
        "cache_memory_mb": 64,
        "cache_dtype": "float16",
    }
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    examples = conll_examples(data_dir / "conll2003" / "train.txt", 4, nlp)
    nlp.initialize(lambda: examples)
    nlp.update(examples)
    assert any((train_dir / "traincache").iterdir())
    nlp.to_disk(tmp_path / "pipeline")
    monkeypatch.chdir(elsewhere)
    loaded = spacy.load(tmp_path / "pipeline")
    loaded("A sentence never seen in training .")
    assert list(elsewhere.iterdir()) == []
    assert layer_cache(loaded.get_pipe("elmo").model) is None
    assert settings(loaded.get_pipe("elmo").model)["cache_dir"] is None


def test_bad_training_cache_setting_fails(tiny_model_files):
    nlp = spacy.blank("en")
    options, weights = tiny_model_files
    nlp.add_pipe("elmo", config={"model": {"options_file": str(options), "weight_file": str(weights)}})
    with pytest.raises(ValueError, match="cache_dtype must be 'float16' or 'float32', got 'int8'"):
        nlp.get_pipe("elmo").initialize(
            lambda: [Example(nlp.make_doc("a b"), nlp.make_doc("a b"))], nlp=nlp, cache_dtype="int8"
        )


def _initialize_elmo(nlp, **cache):
    """Initialize ``nlp``'s elmo component again with these ``[initialize.components.elmo]`` settings;
    returns the biLM's settings afterwards."""
    doc = nlp.make_doc("a b")
    nlp.get_pipe("elmo").initialize(lambda: [Example(doc, doc)], nlp=nlp, **cache)
    return settings(nlp.get_pipe("elmo").model)


@pytest.mark.parametrize(
    "model, init, named",
    [
        ({"cache_dir": "own"}, {"cache_dir": "train"}, ["cache_dir = 'OWN'", "cache_dir = 'TRAIN'"]),
        (
            {"cache_memory_mb": 64},
            {"cache_memory_mb": 512, "cache_dtype": "float16"},
            ["cache_memory_mb = 64, cache_dtype = 'float32' but", "cache_memory_mb = 512.0, cache_dtype = 'float16';"],
        ),
    ],
)
def test_a_cache_set_differently_in_both_sections_is_an_error(tiny_model_files, data_dir, tmp_path, model, init, named):
    """[components.elmo.model] with a cache of its own and an [initialize.components.elmo] value that
    differs: one error line naming both sections, keys and values (no silent precedence)."""
    from elmo_testing import conll_examples, small_config

    paths = {"own": str(tmp_path / "own"), "train": str(tmp_path / "train")}
    config = small_config("ner.cfg", *tiny_model_files, cache_memory_mb=0)
    config["components"]["elmo"]["model"].update({k: paths.get(v, v) for k, v in model.items()})
    config["initialize"]["components"]["elmo"].update({k: paths.get(v, v) for k, v in init.items()})
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    examples = conll_examples(data_dir / "conll2003" / "train.txt", 2, nlp)
    with pytest.raises(ElmoConfigError) as error:
        nlp.initialize(lambda: examples)
    message = str(error.value)
    assert "\n" not in message and "[components.elmo.model]" in message and "[initialize.components.elmo]" in message
    for part in named:
        assert part.replace("OWN", paths["own"]).replace("TRAIN", paths["train"]) in message
    assert not (tmp_path / "own").exists() and not (tmp_path / "train").exists()


@pytest.mark.parametrize("init", [{}, {"cache_dir": "own"}, {"cache_memory_mb": 0, "cache_dtype": "float16"}])
def test_a_model_cache_takes_equal_or_no_initialize_settings(tiny_model_files, tmp_path, init):
    own = tmp_path / "own"
    nlp = elmo_only_nlp(tiny_model_files, cache_dir=str(own), cache_dtype="float16")
    used = _initialize_elmo(nlp, **{k: str(own) if v == "own" else v for k, v in init.items()})
    assert (used["cache_dir"], used["cache_memory_mb"], used["cache_dtype"]) == (str(own), 0, "float16")
    nlp(TEXT)
    assert [p.name.endswith("-float16") for p in own.iterdir()] == [True]


def test_initialize_cache_settings_serve_each_initialize_only(tiny_model_files, tmp_path):
    """Without a model cache, each initialize sets the process's cache afresh: from the values given
    (the others the model's), or none when none is given."""
    nlp = elmo_only_nlp(tiny_model_files, cache_dtype="float16")
    used = _initialize_elmo(nlp, cache_dir=str(tmp_path / "first"))
    assert (used["cache_dir"], used["cache_memory_mb"], used["cache_dtype"]) == (str(tmp_path / "first"), 0, "float16")
    used = _initialize_elmo(nlp, cache_dir=str(tmp_path / "second"), cache_dtype="float32")
    assert (used["cache_dir"], used["cache_dtype"]) == (str(tmp_path / "second"), "float32")
    nlp(TEXT)
    assert [p.name.endswith("-float32") for p in (tmp_path / "second").iterdir()] == [True]
    _initialize_elmo(nlp)
    assert layer_cache(nlp.get_pipe("elmo").model) is None
    assert not (tmp_path / "first").exists()


def test_no_layer_cache_by_default(tiny_model_files):
    """At inference the memory cache is off unless asked for (see README, "The layer cache")."""
    model = elmo_only_nlp(tiny_model_files).get_pipe("elmo").model
    assert settings(model)["cache_memory_mb"] == 0 and settings(model)["cache_dir"] is None
    assert layer_cache(model) is None


def test_only_the_released_bilm_version_is_registered():
    """BiLM.v1 and v2 were never released and are gone; v3 takes 'auto' and caches nothing in memory by default."""
    import inspect

    from spacy.util import registry

    names = {name for name in registry.architectures.get_all() if name.startswith("spacy-elmo-mix.BiLM.")}
    assert names == {"spacy-elmo-mix.BiLM.v3"}
    v3 = registry.architectures.get("spacy-elmo-mix.BiLM.v3")
    assert inspect.signature(v3).parameters["cache_memory_mb"].default == 0
    assert settings(v3(compute_dtype="auto"))["compute_dtype"] == "auto"
