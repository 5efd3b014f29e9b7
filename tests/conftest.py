"""Shared test fixtures: locations of the read-only data in ../shared (skipped when absent)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[1]
# Resolved, as REPO is: ../shared is often a symlink, and code under test records real paths (a run's
# identity names the biLM files it read), which tests compare with these.
SHARED = Path(os.environ.get("SPACY_ELMO_MIX_SHARED", REPO.parent / "shared")).resolve()
FIXTURES = SHARED / "elmo_fixtures"
DATA = SHARED / "data"


def _require(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is absent: the shared ELMo fixtures/data are not available on this machine")
    return path


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """``../shared/elmo_fixtures`` (tiny ELMo models with reference outputs)."""
    return _require(FIXTURES)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """``../shared/data`` (CoNLL-2003, WNUT16, CoNLL-2000, UD EWT, raw text)."""
    return _require(DATA)


@pytest.fixture(scope="session")
def tiny_model_files(fixtures_dir):
    """(options.json, weights.hdf5) of the trained tiny bilm-tf fixture model."""
    return fixtures_dir / "tf_fixture" / "options.json", fixtures_dir / "tf_fixture" / "lm_weights.hdf5"


@pytest.fixture(scope="session", autouse=True)
def single_torch_thread():
    """Run tests on one torch thread: on 2 shared CI cores, 2 OpenMP threads made the small models'
    tests 4-20x slower (threads spin waiting for a busy core)."""
    with torch_threads(1):
        yield


@contextlib.contextmanager
def torch_threads(n: int):
    """torch on ``n`` intra-op threads inside the block, the previous count restored after it."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def tiny_embedder(tiny_model_files):
    """A frozen :class:`ElmoEmbedder` on the tiny bilm-tf fixture model (shared: do not modify)."""
    from spacy_elmo_mix.bilm import ElmoEmbedder

    return ElmoEmbedder(*tiny_model_files)


class LSTMCall(NamedTuple):
    """One ``LSTMLayer.forward`` call: the layer and its arguments."""

    layer: object
    x: object
    batch_sizes: list
    rows: object


@pytest.fixture
def lstm_calls(monkeypatch):
    """Every ``LSTMLayer.forward`` call made while the test runs, as :class:`LSTMCall`s (clear it to
    count from a later point)."""
    from spacy_elmo_mix.bilm.modules import LSTMLayer

    calls = []
    original = LSTMLayer.forward

    def spy(self, x, batch_sizes, rows=None):
        calls.append(LSTMCall(self, x, batch_sizes, rows))
        return original(self, x, batch_sizes, rows)

    monkeypatch.setattr(LSTMLayer, "forward", spy)
    return calls
