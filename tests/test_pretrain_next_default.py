"""The training run of the embedded biLM kept in ``pretraining/``: the shipped weights are exactly its
biLM, on the embedded model's vocabulary, and its README reports it truthfully."""
from __future__ import annotations

import importlib.util

import pytest
import torch

from spacy_elmo_mix.bilm import BiLMOptions, load_bilm
from spacy_elmo_mix.default_model import DIRECTORY, default_model_files
from spacy_elmo_mix.pretrain.checkpoint import load_checkpoint
from spacy_elmo_mix.pretrain.vocab import Vocabulary

from elmo_testing import REPO

FOLDER = REPO / "pretraining"


def _progress_module():
    spec = importlib.util.spec_from_file_location("progress", FOLDER / "progress.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def state():
    return load_checkpoint(FOLDER / "checkpoint.pt")


def test_same_size_and_vocabulary_as_the_embedded_model(state):
    """Perplexities stay comparable with the model card only on the same vocabulary."""
    assert state["vocab"] == Vocabulary.load(DIRECTORY / "vocab.txt").words
    assert BiLMOptions.from_dict(state["options"]) == BiLMOptions.from_file(DIRECTORY / "options.json")
    assert state["config"]["init_weights"].endswith("default_model/weights.hdf5")


def test_readme_reports_the_checkpoints_progress(state):
    """Every held-out evaluation of the checkpoint, its step and time, as progress.py writes them."""
    progress = _progress_module()
    text = (FOLDER / "README.md").read_text(encoding="utf-8")
    block = progress.progress_block(state)
    assert f"{progress.START}\n{block}\n{progress.END}" in text
    assert block.count("\n| ") == len(state["history"]["heldout"]) + 1 >= 2


def test_shipped_weights_are_the_checkpoints_bilm(state):
    """The embedded model is traceable to this run: its weights.hdf5 holds the checkpoint's biLM, bit for bit."""
    shipped = load_bilm(*default_model_files())
    trained = {k[len("bilm."):]: v for k, v in state["model"].items() if k.startswith("bilm.")}
    assert trained.keys() == shipped.state_dict().keys()
    for name, value in shipped.state_dict().items():
        assert torch.equal(value, trained[name]), name
