"""The cache command keys the docs training reads: after `cache`, a training run computes no ELMo layer."""

from __future__ import annotations

import json

import pytest
import torch

from spacy_elmo_mix.bilm.precision import cpu_flags
from spacy_elmo_mix.cli.cache import main as cache_cli
from spacy_elmo_mix.cli.cache import unique_sentences
from spacy_elmo_mix.workflow.convert import convert_dataset
from spacy_elmo_mix.workflow.protocol import Protocol
from spacy_elmo_mix.workflow.run import RunSpec, run_one


def _cache_files(cache_dir):
    return {p.relative_to(cache_dir): p.stat().st_size for p in cache_dir.rglob("*") if p.is_file()}


@pytest.mark.parametrize("tokens", ["given", "retokenized"])
def test_cache_holds_every_sequence_training_reads(tiny_model_files, data_dir, tmp_path, tokens):
    corpus = tmp_path / "corpus" / "conll2003"
    convert_dataset("conll2003", data_dir / "conll2003", corpus, max_sentences=25)
    given = tokens == "given"
    sequences = unique_sentences([corpus / "train.spacy"], 256, gold_preproc=given)
    # the corpus's own tokens, or spaCy's retokenization of its text
    assert (["BRUSSELS", "1996-08-22"] in sequences) == given
    assert (["BRUSSELS", "1996", "-", "08", "-", "22"] in sequences) != given

    options, weights = map(str, tiny_model_files)
    cache_dir = tmp_path / "cache"
    files = [str(corpus / f"{split}.spacy") for split in ("train", "dev", "test")]
    argv = ["--options", options, "--weights", weights, "--cache-dir", str(cache_dir), "--dtype", "float32", *files]
    assert cache_cli(argv + (["--gold-preproc"] if given else [])) == 0
    before = _cache_files(cache_dir)
    spec = RunSpec(
        "conll2003",
        "weighted",
        1,
        tmp_path / "run",
        tmp_path / "corpus",
        options,
        weights,
        Protocol(max_steps=4, eval_frequency=2, tokens=tokens),
        cache_dir=str(cache_dir),
        cache_dtype="float32",
        overrides={"components.ner.model.tok2vec.width": 32},
    )
    metrics = run_one(spec)
    assert 0.0 <= metrics["score"] <= 1.0 and metrics["protocol"]["tokens"] == tokens
    assert _cache_files(cache_dir) == before  # no entry added: every layer came from the cache
    recorded = json.loads((tmp_path / "run" / "metrics.json").read_text())
    identity = recorded["identity"]
    assert str((corpus / "train.spacy").resolve()) in identity["files"] and options in "".join(identity["files"])
    environment = recorded["environment"]  # where it ran, beside the identity
    assert environment["torch"] == torch.__version__ and environment["torch_threads"] >= 1
    assert set(environment["cpu_flags"]) <= cpu_flags()


@pytest.mark.parametrize(
    "dataset, source, component", [("sst5", "sst5", "textcat"), ("ud_ewt_parse", "ud_ewt", "parser")]
)
def test_textcat_and_parser_runs_read_every_layer_from_the_cache(
    tiny_model_files, data_dir, tmp_path, dataset, source, component
):
    corpus = tmp_path / "corpus" / dataset
    convert_dataset(dataset, data_dir / source, corpus, max_sentences=30)
    options, weights = map(str, tiny_model_files)
    cache_dir = tmp_path / "cache"
    files = [str(corpus / f"{split}.spacy") for split in ("train", "dev", "test")]
    argv = ["--options", options, "--weights", weights, "--cache-dir", str(cache_dir), "--dtype", "float16"]
    assert cache_cli([*argv, "--gold-preproc", *files]) == 0
    before = _cache_files(cache_dir)
    tok2vec = f"components.{component}.model.tok2vec"
    spec = RunSpec(
        dataset,
        "weighted12",
        1,
        tmp_path / "run",
        tmp_path / "corpus",
        options,
        weights,
        Protocol(patience_epochs=1, max_epochs=2),
        cache_dir=str(cache_dir),
        architecture="paper",
        overrides={f"{tok2vec}.width": 16, f"{tok2vec}.depth": 1},
    )
    metrics = run_one(spec)
    assert metrics["metric"] == ("cats_acc" if component == "textcat" else "dep_las")
    assert 0.0 <= metrics["score"] <= 1.0 and metrics["epochs"] >= 1
    assert metrics["config"] == f"{component}.cfg"
    assert len(metrics["layer_weights"][component]["weights"]) == 2  # weighted12: the first two layers
    assert _cache_files(cache_dir) == before  # no entry added: every layer came from the cache


def test_cache_command_reports_float16_overflow_in_one_line(tiny_model_files, tmp_path, monkeypatch, capsys):
    import spacy
    from spacy.tokens import DocBin

    from spacy_elmo_mix.__main__ import main as cli
    from spacy_elmo_mix.bilm.embedder import ElmoEmbedder

    embed = ElmoEmbedder.embed_batch
    monkeypatch.setattr(ElmoEmbedder, "embed_batch", lambda self, *a, **k: [x * 1e6 for x in embed(self, *a, **k)])
    DocBin(docs=[spacy.blank("en")("Large values here .")]).to_disk(tmp_path / "a.spacy")
    options, weights = map(str, tiny_model_files)
    argv = ["cache", "--options", options, "--weights", weights, "--cache-dir", str(tmp_path / "cache")]
    assert cli(argv + ["--dtype", "float16", "--report", str(tmp_path / "report.json"), str(tmp_path / "a.spacy")]) == 1
    err = capsys.readouterr().err
    last = err.splitlines()[-1]
    assert "Traceback" not in err and last.startswith("error: ") and "cannot cache these layers as float16" in last
    assert not (tmp_path / "report.json").exists()
    assert cli(argv + ["--dtype", "float32", "--report", str(tmp_path / "report.json"), str(tmp_path / "a.spacy")]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["sentences"] == 1 and report["tokens"] == 4


def test_cache_command_rejects_a_file_with_no_docs(tiny_model_files, tmp_path, capsys):
    from spacy_elmo_mix.__main__ import main

    text = tmp_path / "train.txt"
    text.write_text("EU rejects German call\n", encoding="utf-8")
    options, weights = tiny_model_files
    assert (
        main(
            [
                "cache",
                "--cache-dir",
                str(tmp_path / "cache"),
                "--options",
                str(options),
                "--weights",
                str(weights),
                str(text),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "train.txt: no docs found" in err
