"""The cache command keys the docs training reads: after `cache`, a training run computes no ELMo layer."""
from __future__ import annotations

import json

from spacy_elmo_mix.cli.cache import main as cache_cli
from spacy_elmo_mix.cli.cache import unique_sentences
from spacy_elmo_mix.workflow.convert import convert_dataset
from spacy_elmo_mix.workflow.run import run_one


def _cache_files(cache_dir):
    return {p.relative_to(cache_dir): p.stat().st_size for p in cache_dir.rglob("*") if p.is_file()}


def test_cache_holds_every_sequence_training_reads(tiny_model_files, data_dir, tmp_path):
    corpus = tmp_path / "corpus" / "conll2003"
    convert_dataset("conll2003", data_dir / "conll2003", corpus, max_sentences=25)
    sequences = unique_sentences([corpus / "train.spacy"], 256)
    assert ["BRUSSELS", "1996", "-", "08", "-", "22"] in sequences  # retokenized as training sees it
    assert ["BRUSSELS", "1996-08-22"] not in sequences

    options, weights = map(str, tiny_model_files)
    cache_dir = tmp_path / "cache"
    files = [str(corpus / f"{split}.spacy") for split in ("train", "dev", "test")]
    assert cache_cli(["--options", options, "--weights", weights, "--cache-dir", str(cache_dir), *files]) == 0
    before = _cache_files(cache_dir)
    metrics = run_one(
        "conll2003", "weighted", 1, tmp_path / "run", tmp_path / "corpus", options, weights, max_steps=4,
        eval_frequency=2, cache_dir=str(cache_dir), overrides={"components.ner.model.tok2vec.width": 32},
    )
    assert 0.0 <= metrics["score"] <= 1.0
    assert _cache_files(cache_dir) == before  # no entry added: every layer came from the cache
    identity = json.loads((tmp_path / "run" / "metrics.json").read_text())["identity"]
    assert str((corpus / "train.spacy").resolve()) in identity["files"] and options in "".join(identity["files"])
