"""Where a run ran: recorded in its ``metrics.json`` beside its identity, not part of it.

The identity (``identity.py``) decides whether a run is up to date: its settings, data, config and
biLM. The code and the machine are not in it (a run on another CPU, or after a change that keeps the
arithmetic, is the same run), but a reader of a table must be able to see which package version,
checkout and CPU produced each number; :func:`run_environment` records them.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Dict, Optional

import spacy
import torch

from ..about import __version__
from ..bilm.precision import cpu_flags, cpu_model, cpu_vendor

PACKAGE_DIR = Path(__file__).resolve().parents[1]
# The flags that choose the CPU kernels torch, oneDNN and this package's biLM run.
KERNEL_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def git_checkout(directory: Path = PACKAGE_DIR, timeout: float = 10.0) -> Optional[str]:
    """The commit of the git checkout holding ``directory``, with ``+dirty`` when files of that
    directory differ from it; None outside a checkout (an installed wheel) or without git."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=directory, capture_output=True, text=True, timeout=timeout, check=True
        ).stdout.strip()
        changes = subprocess.run(
            ["git", "status", "--porcelain", "--", "."],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if changes else "") if commit else None


def cpu_environment() -> Dict[str, object]:
    """This machine's CPU as a run records it: ``cpu`` (vendor and model) and ``cpu_flags`` (those
    of :data:`KERNEL_FLAGS` it has)."""
    flags = cpu_flags()
    return {
        "cpu": " ".join(part for part in (cpu_vendor(), cpu_model()) if part),
        "cpu_flags": [flag for flag in KERNEL_FLAGS if flag in flags],
    }


def run_environment() -> Dict[str, object]:
    """The package version and checkout, spaCy's and torch's versions, the CPU and torch's threads."""
    return {
        "spacy_elmo_mix": __version__,
        "git_commit": git_checkout(),
        "spacy": spacy.__version__,
        "torch": torch.__version__,
        **cpu_environment(),
        "torch_threads": torch.get_num_threads(),
    }
