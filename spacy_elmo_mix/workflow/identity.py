"""What produced a run: its identity, recorded in ``metrics.json`` and checked before trusting it.

A run's identity is a JSON object::

    {"command": "python -m spacy_elmo_mix run --dataset ... --output {output}",  # the filled grid command
     "settings": {...},                  # the resolved training settings (config file name, overrides)
     "files": {"corpus/train.spacy": "<sha256>",             # every file the run read: corpus, config,
               "<spacy_elmo_mix>/configs/crf_ner.cfg": ...},  # biLM (see portable_path)
     "seed": 1}

The grid reruns a job when the command it would run now differs from the recorded one, or when any
recorded file's content changed; ``compare`` leaves out (and lists) runs whose files changed, and
refuses to tabulate runs whose files it cannot find (an unchecked run is not a current one). Hashes
are memoized per (path, size, mtime), so checking a grid of runs on the same files hashes each once.
Identities name no machine: a clone of the project in another folder, with another interpreter,
checks the committed runs against its own files.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple, Union

PathLike = Union[str, Path]
# The environment variable through which the grid tells a job the command it runs (its identity).
COMMAND_ENV = "SPACY_ELMO_MIX_RUN_COMMAND"
_HASHES: Dict[Tuple[str, int, int], str] = {}
# How an identity names a file of this package (a shipped config, the embedded biLM).
PACKAGE_DIR = Path(__file__).resolve().parents[1]
PACKAGE_PREFIX = "<spacy_elmo_mix>/"


def portable_path(path: PathLike) -> str:
    """How an identity names ``path``: by its real path (symlinks resolved), written relative to
    this package's folder (``<spacy_elmo_mix>/...``) when it is one of the package's files, else
    relative to the working folder (the project) when it lies under it, else absolute."""
    real = Path(path).resolve()
    for base, prefix in ((PACKAGE_DIR, PACKAGE_PREFIX), (Path.cwd().resolve(), "")):
        if real.is_relative_to(base):
            return prefix + real.relative_to(base).as_posix()
    return str(real)


def local_path(name: str, base: Optional[PathLike] = None) -> Path:
    """The file an identity's ``name`` (from :func:`portable_path`) means here; base: the folder the
    run worked in (None: the working folder)."""
    if name.startswith(PACKAGE_PREFIX):
        return PACKAGE_DIR / name[len(PACKAGE_PREFIX) :]
    return Path(base or ".") / name


def file_sha256(path: PathLike) -> Optional[str]:
    """The sha256 of ``path``'s content (hex), or None when it is not a readable file."""
    try:
        stat = os.stat(path)
        key = (str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns)
        if key not in _HASHES:
            digest = hashlib.sha256()
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            _HASHES[key] = digest.hexdigest()
        return _HASHES[key]
    except OSError:
        return None


def make_identity(command: Optional[str], settings: dict, files: Iterable[PathLike], seed: int) -> dict:
    """A run's identity (see the module docstring).

    command: the grid's filled command (None when run outside the grid); settings: the resolved
    training settings (JSON-serializable); files: the files the run reads; seed: its random seed.
    """
    return {
        "command": command,
        "settings": settings,
        "files": {portable_path(p): file_sha256(p) for p in files},
        "seed": int(seed),
    }


def absent_inputs(identity: object, base: Optional[PathLike] = None) -> List[str]:
    """The files a recorded identity names that cannot be read now, as the identity names them.

    identity: the ``identity`` object of a metrics.json (anything else: none absent); base: as for
    :func:`stale_reason`. A run with an absent input can be neither trusted nor called out of date.
    """
    files = identity.get("files") if isinstance(identity, dict) else None
    if not isinstance(files, dict):
        return []
    return [path for path in files if file_sha256(local_path(path, base)) is None]


def absent_inputs_message(absent: Dict[str, str]) -> str:
    """The one-line error for runs whose recorded inputs are not here; absent: dataset -> the first
    such file of its runs (as :func:`absent_inputs` names it)."""
    runs = ", ".join(f"{dataset} ({path} not found)" for dataset, path in sorted(absent.items()))
    return f"cannot check the runs of {runs}: run their convert step (or restore the file) first, or leave them out of --datasets"


def stale_reason(identity: object, command: Optional[str] = None, base: Optional[PathLike] = None) -> Optional[str]:
    """Why a recorded identity no longer matches (None: it is current).

    identity: the ``identity`` object of a metrics.json (None or malformed: "no identity recorded");
    command: the command the grid would run now (None: do not compare commands); base: the folder
    the run worked in, against which relative file names are read (None: the working folder).
    """
    if not isinstance(identity, dict) or not isinstance(identity.get("files", {}), dict):
        return "no identity recorded (run by an older version?)"
    if command is not None and identity.get("command") != command:
        return "its command changed"
    for path, digest in identity.get("files", {}).items():
        local = local_path(path, base)
        now = file_sha256(local)
        if now != digest:
            return f"{path} changed" if now is not None else f"{path} not found ({local.absolute()})"
    return None
