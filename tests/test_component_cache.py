"""The layer cache inside the elmo component: no biLM work for seen sentences, never stale."""

from __future__ import annotations

import numpy as np
import torch

from elmo_testing import elmo_only_nlp
from spacy_elmo_mix.layers.bilm_model import get_bilm, layer_cache

TEXTS = ["The cat sat on the mat .", "Peter lives in Berlin .", "A third , longer sentence about caching layers ."]


def _nlp(tiny_model_files, **model_config):
    """The elmo component with a 512 MiB memory cache unless ``model_config`` says otherwise."""
    return elmo_only_nlp(tiny_model_files, **{"cache_memory_mb": 512, **model_config})


def _layers(nlp, texts=TEXTS):
    return [doc._.elmo_layers for doc in nlp.pipe(texts)]


def test_seen_sentences_do_no_bilm_work(tiny_model_files, lstm_calls):
    nlp = _nlp(tiny_model_files)
    first = _layers(nlp)
    assert lstm_calls
    lstm_calls.clear()
    second = _layers(nlp)
    assert lstm_calls == []
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    uncached = _layers(_nlp(tiny_model_files, cache_memory_mb=0))
    for a, b in zip(first, uncached):
        np.testing.assert_allclose(a, b, atol=1e-6)
    assert layer_cache(nlp.get_pipe("elmo").model).stats.hits == len(TEXTS)


def test_disk_cache_is_shared_between_pipelines(tiny_model_files, tmp_path, lstm_calls):
    exact = _layers(_nlp(tiny_model_files, cache_memory_mb=0))
    writer = _nlp(tiny_model_files, cache_dir=str(tmp_path), cache_dtype="float16")
    _layers(writer)
    lstm_calls.clear()
    reader = _nlp(tiny_model_files, cache_dir=str(tmp_path), cache_dtype="float16", cache_memory_mb=0)
    cached = _layers(reader)
    assert lstm_calls == []
    for a, b in zip(exact, cached):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-3)


def test_changed_weights_never_read_stale_layers(tiny_model_files, tmp_path):
    first = _nlp(tiny_model_files, cache_dir=str(tmp_path))
    before = _layers(first)
    changed = _nlp(tiny_model_files, cache_dir=str(tmp_path))
    with torch.no_grad():
        get_bilm(changed.get_pipe("elmo").model).stacks[0][0].bias.add_(0.5)
    after = _layers(changed)
    assert not np.allclose(before[0][1], after[0][1])


def test_fine_tuning_bypasses_the_cache(tiny_model_files, lstm_calls):
    nlp = _nlp(tiny_model_files, frozen=False)
    from spacy.training import Example

    examples = [Example.from_dict(nlp.make_doc(t), {}) for t in TEXTS]
    for _ in range(2):
        lstm_calls.clear()
        nlp.get_pipe("elmo").update(examples)
        assert lstm_calls


def test_cache_command_serves_a_bfloat16_pipeline(tiny_model_files, tmp_path, lstm_calls):
    """`cache --compute-dtype bfloat16` fills the entries a ``compute_dtype = "bfloat16"`` pipeline
    reads; a float32 pipeline on the same folder computes its own."""
    from spacy.tokens import DocBin

    from spacy_elmo_mix.cli.cache import main

    nlp = _nlp(tiny_model_files, cache_memory_mb=0)
    DocBin(docs=[nlp.make_doc(t) for t in TEXTS]).to_disk(tmp_path / "docs.spacy")
    options, weights = map(str, tiny_model_files)
    argv = [
        "--options",
        options,
        "--weights",
        weights,
        "--cache-dir",
        str(tmp_path / "cache"),
        "--compute-dtype",
        "bfloat16",
    ]
    assert main(argv + [str(tmp_path / "docs.spacy")]) == 0
    lstm_calls.clear()
    low = _nlp(tiny_model_files, cache_dir=str(tmp_path / "cache"), compute_dtype="bfloat16")
    _layers(low)
    assert lstm_calls == []
    _layers(_nlp(tiny_model_files, cache_dir=str(tmp_path / "cache")))
    assert lstm_calls
