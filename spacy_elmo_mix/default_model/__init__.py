"""The small English biLM shipped with the package (``options.json`` + ``weights.hdf5`` here)."""

from __future__ import annotations

from pathlib import Path
from typing import Tuple

from ..errors import ElmoFileError

DIRECTORY = Path(__file__).parent


def default_model_files() -> Tuple[Path, Path]:
    """Paths of the embedded default model's ``options.json`` and ``weights.hdf5``."""
    options, weights = DIRECTORY / "options.json", DIRECTORY / "weights.hdf5"
    if not options.exists() or not weights.exists():
        raise ElmoFileError(
            f"The embedded default ELMo model is missing from {DIRECTORY}; "
            "pass options_file/weight_file explicitly or reinstall spacy-elmo-mix"
        )
    return options, weights
