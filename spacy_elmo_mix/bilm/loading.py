"""Building a :class:`BiLM` from ``options.json`` + ``weights.hdf5`` (paths or URLs), and saving one."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Union

from .files import resolve_path
from .modules import BiLM
from .options import BiLMOptions
from .weights import load_weights, save_weights

PathOrUrl = Union[str, Path]
OPTIONS_NAME = "options.json"
WEIGHTS_NAME = "weights.hdf5"


def load_bilm(options_file: PathOrUrl, weight_file: Optional[PathOrUrl]) -> BiLM:
    """A biLM in eval mode from published files; URLs are downloaded once (cached-path).

    ``weight_file=None`` gives randomly initialised weights (for pretraining).
    """
    options = BiLMOptions.from_file(resolve_path(options_file, "ELMo options file"))
    model = BiLM(options)
    if weight_file is not None:
        load_weights(model, resolve_path(weight_file, "ELMo weight file"))
    return model.eval()


def save_bilm(model: BiLM, directory: PathOrUrl) -> Path:
    """Write ``options.json`` and ``weights.hdf5`` into ``directory`` (each atomically)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model.options.to_file(directory / OPTIONS_NAME)
    save_weights(model, directory / WEIGHTS_NAME)
    return directory
