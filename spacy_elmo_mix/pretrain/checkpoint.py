"""Checkpoints: everything needed to continue a run exactly, written atomically."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Dict, Union

import numpy as np
import torch

from ..atomic import atomic_write
from ..errors import ElmoFileError

CHECKPOINT_NAME = "checkpoint.pt"
CHECKPOINT_KEYS = frozenset(
    {
        "model",
        "optimizer",
        "scheduler",
        "rng",
        "position",
        "elapsed_s",
        "history",
        "config",
        "options",
        "vocab",
        "data",
        "summary",
    }
)


def rng_states() -> Dict[str, Any]:
    """The states of torch's (CPU and, when present, CUDA), numpy's and Python's global random generators."""
    states = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_rng_states(states: Dict[str, Any]) -> None:
    """Undo :func:`rng_states` (the CUDA states only on a machine with as many CUDA devices)."""
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available() and len(states["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(states["cuda"])
    np.random.set_state(states["numpy"])
    random.setstate(states["python"])


def save_checkpoint(state: Dict[str, Any], path: Union[str, Path]) -> None:
    """Write ``state`` (tensors, numbers, lists, dicts) to ``path`` via a temporary file and rename."""
    with atomic_write(Path(path)) as tmp:
        torch.save(state, tmp)


def load_checkpoint(path: Union[str, Path]) -> Dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint`; a clear error if it is missing or corrupt."""
    path = Path(path)
    if not path.is_file():
        raise ElmoFileError(f"No checkpoint to resume from: {path} does not exist")
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # torch raises many types for truncated or foreign files
        raise ElmoFileError(f"Cannot read checkpoint {path} ({type(exc).__name__}: {exc})") from None
    missing = sorted(CHECKPOINT_KEYS - set(state)) if isinstance(state, dict) else ["(not a dictionary)"]
    if missing:
        raise ElmoFileError(f"{path} is not a pretraining checkpoint of this version: missing {', '.join(missing)}")
    return state
