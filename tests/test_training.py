"""End to end: ``spacy debug config`` and short ``spacy train`` runs with the shipped configs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
from spacy.cli.train import train
from spacy.tokens import DocBin
from spacy.training.converters import conllu_to_docs
from thinc.api import Config

from elmo_testing import CONFIGS, conll_examples
from spacy_elmo_mix.workflow.convert import convert_dataset

CONFIG_NAMES = ["ner.cfg", "tagger.cfg"]
ALL_CONFIGS = sorted(p.name for p in CONFIGS.glob("*.cfg"))


def _write(docs, path: Path) -> Path:
    DocBin(docs=docs).to_disk(path)
    return path


@pytest.fixture(scope="module")
def corpora(data_dir, tmp_path_factory):
    """Small .spacy slices: CoNLL-2003 NER, UD English EWT tags (spaCy's CoNLL-U converter), and
    SST-5 classes and UD English EWT trees (this package's converter), keyed by task."""
    out = tmp_path_factory.mktemp("corpora")
    nlp = spacy.blank("en")
    ner = [eg.reference for eg in conll_examples(data_dir / "conll2003" / "train.txt", 80, nlp)]
    text = (data_dir / "ud_ewt" / "en_ewt-ud-train.conllu").read_text(encoding="utf-8")
    ud = list(conllu_to_docs(text[: text.index("\n\n", 150_000)], n_sents=1, no_print=True))
    assert len(ud) > 60, "the UD slice is too small"
    for dataset, source in (("sst5", "sst5"), ("ud_ewt_parse", "ud_ewt")):
        convert_dataset(dataset, data_dir / source, out / dataset, max_sentences=40)
    return {
        "ner": (_write(ner[:60], out / "ner-train.spacy"), _write(ner[60:], out / "ner-dev.spacy")),
        "tagger": (_write(ud[:-30], out / "ud-train.spacy"), _write(ud[-30:], out / "ud-dev.spacy")),
        "textcat": (out / "sst5" / "train.spacy", out / "sst5" / "dev.spacy"),
        "parser": (out / "ud_ewt_parse" / "train.spacy", out / "ud_ewt_parse" / "dev.spacy"),
    }


def _overrides(tiny_model_files, train_path, dev_path, task):
    """Tiny-model settings for a shipped config whose task component is ``task``: the CNN configs'
    ``ner``/``tagger``, or the paper's BiLSTM under ``crf_ner``/``crf_tagger``/``textcat``/``parser``."""
    options, weights = tiny_model_files
    tok2vec = f"components.{task}.model.tok2vec"
    if task.startswith("crf_") or task in ("textcat", "parser"):
        shrink = {f"{tok2vec}.width": 16, f"{tok2vec}.depth": 1}
    else:
        shrink = {f"{tok2vec}.width": 32, f"{tok2vec}.encoder.width": 32, f"{tok2vec}.encoder.depth": 1}
    return {
        "paths.train": str(train_path),
        "paths.dev": str(dev_path),
        "paths.elmo_options": str(options),
        "paths.elmo_weights": str(weights),
        **shrink,
        "training.max_steps": 40,
        "training.eval_frequency": 10,
    }


def _task(config_name: str) -> str:
    """The task component of a shipped config: ``crf_tagger.cfg`` -> ``crf_tagger``, ``ner_baseline.cfg`` -> ``ner``."""
    return Config().from_disk(CONFIGS / config_name, interpolate=False)["nlp"]["pipeline"][-1]


@pytest.mark.parametrize("config_name", ALL_CONFIGS)
def test_debug_config_passes(config_name, tiny_model_files, corpora):
    task = _task(config_name)
    train_path, dev_path = corpora[task.removeprefix("crf_")]
    overrides = {"paths.train": train_path, "paths.dev": dev_path}
    if "baseline" not in config_name:
        overrides = _overrides(tiny_model_files, train_path, dev_path, task)
    args = [f"--{k}={v}" for k, v in overrides.items()]
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "debug", "config", str(CONFIGS / config_name), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Config is valid" in result.stdout


@pytest.mark.parametrize("config_name", CONFIG_NAMES)
def test_short_training_run_learns(config_name, tiny_model_files, corpora, tmp_path):
    task = "ner" if config_name == "ner.cfg" else "tagger"
    log = tmp_path / "log.jsonl"
    overrides = _overrides(tiny_model_files, *corpora[task], task)
    overrides["training.logger.path"] = str(log)
    train(CONFIGS / config_name, tmp_path / "out", overrides=overrides)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    windows = [r for r in records if r["step"] > 0]
    assert len(windows) == 4
    assert windows[-1]["losses"][task] < windows[0]["losses"][task]
    mix = windows[-1]["weights"][task][0]
    assert mix["trainable"] and mix["layers"] == [0, 1, 2]
    assert max(abs(w - 1 / 3) for w in mix["weights"]) > 1e-4 or abs(mix["gamma"] - 1.0) > 1e-4
    # The saved pipeline loads and reports the same learned weights.
    result = subprocess.run(
        [sys.executable, "-m", "spacy_elmo_mix", "weights", str(tmp_path / "out" / "model-last"), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)[task][0]["weights"] == pytest.approx(mix["weights"], abs=1e-6)
