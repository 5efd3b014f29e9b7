"""The training run of the embedded biLM recorded in ``pretraining/run.json``: the shipped weights
are exactly its biLM, on the embedded model's vocabulary, and its README reports it truthfully."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from elmo_testing import REPO
from spacy_elmo_mix.bilm import BiLMOptions, load_bilm
from spacy_elmo_mix.default_model import DIRECTORY, default_model_files
from spacy_elmo_mix.pretrain.vocab import Vocabulary

FOLDER = REPO / "pretraining"


@pytest.fixture(scope="module")
def progress():
    spec = importlib.util.spec_from_file_location("progress", FOLDER / "progress.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def record():
    return json.loads((FOLDER / "run.json").read_text(encoding="utf-8"))


def test_same_size_and_vocabulary_as_the_embedded_model(record, progress):
    """Perplexities stay comparable with the model card only on the same vocabulary."""
    assert record["vocab_sha256"] == progress.words_sha256(Vocabulary.load(DIRECTORY / "vocab.txt").words)
    assert BiLMOptions.from_dict(record["options"]) == BiLMOptions.from_file(DIRECTORY / "options.json")
    assert record["config"]["init_weights"].endswith("default_model/weights.hdf5")


def test_readme_reports_the_runs_progress(record, progress):
    """Every held-out evaluation of the run, its step and time, as progress.py writes them."""
    text = (FOLDER / "README.md").read_text(encoding="utf-8")
    block = progress.progress_block(record)
    assert f"{progress.START}\n{block}\n{progress.END}" in text
    assert block.count("\n| ") == len(record["history"]["heldout"]) + 1 >= 2


def test_shipped_weights_are_the_runs_bilm(record, progress):
    """The embedded model is traceable to the run: its weights.hdf5 holds the recorded biLM, bit for bit."""
    assert progress.tensors_sha256(load_bilm(*default_model_files()).state_dict()) == record["bilm_sha256"]


def test_the_digest_sees_one_changed_bit(progress):
    """The digest the test above relies on changes with any single bit of any tensor."""
    state = load_bilm(*default_model_files()).state_dict()
    before = progress.tensors_sha256(state)
    name = sorted(state)[len(state) // 2]
    state[name].view(-1).view(torch.int32)[0] ^= 1
    assert progress.tensors_sha256(state) != before


def test_a_local_checkpoint_matches_its_record(record, progress):
    """Where the run's checkpoint is present (it is not committed), run.json is its record."""
    checkpoint = FOLDER / record["checkpoint"]["file"]
    if not checkpoint.exists():
        pytest.skip(
            f"{checkpoint} is not here (not committed: 46 MB); run.json is checked against the shipped model above"
        )
    from spacy_elmo_mix.pretrain.checkpoint import load_checkpoint

    assert progress.record_of(load_checkpoint(checkpoint), checkpoint) == record
