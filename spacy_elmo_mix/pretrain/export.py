"""Exporting a trained biLM: ``options.json`` + ``weights.hdf5`` (bilm-tf layout) and ``vocab.txt``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Optional, Union

from ..bilm import BiLM, save_bilm
from .vocab import Vocabulary


def truncated_bilm(bilm: BiLM, n_layers: int) -> BiLM:
    """A copy of ``bilm`` keeping its char-CNN and its first ``n_layers`` LSTM layers per direction."""
    if not 1 <= n_layers <= bilm.options.lstm.n_layers:
        raise ValueError(f"Cannot export {n_layers} LSTM layers from a biLM with {bilm.options.lstm.n_layers}")
    options = replace(bilm.options, lstm=replace(bilm.options.lstm, n_layers=n_layers))
    smaller = BiLM(options)
    kept = {
        k: v for k, v in bilm.state_dict().items() if not k.startswith("stacks.") or int(k.split(".")[2]) < n_layers
    }
    smaller.load_state_dict(kept)
    return smaller.eval()


def export_model(bilm: BiLM, vocab: Vocabulary, directory: Union[str, Path], n_layers: Optional[int] = None) -> Path:
    """Write ``options.json``, ``weights.hdf5`` and ``vocab.txt`` into ``directory``.

    n_layers: export only the first LSTM layer(s) (1: a smaller, faster ``n_layers: 1`` model).
    """
    if n_layers is not None and n_layers != bilm.options.lstm.n_layers:
        bilm = truncated_bilm(bilm, n_layers)
    directory = save_bilm(bilm, directory)
    vocab.save(Path(directory) / "vocab.txt")
    return Path(directory)
