"""spacy-elmo-mix: ELMo for spaCy v3, with the combination of ELMo layers as a measurable setting.

Heavy libraries (torch, h5py) are imported lazily, so registering this plugin's entry points keeps
``spacy.blank`` fast.

oneDNN, which runs torch's CPU LSTMs and the BiLSTM kernel's and bfloat16 products, keeps a
compiled primitive with its buffers for every shape it has run, 1,024 of them by default; shapes
that follow sentence lengths are new with almost every batch, and the kept primitives grew a
training process by gigabytes. Importing this package sets ``$ONEDNN_PRIMITIVE_CACHE_CAPACITY`` to
:data:`ONEDNN_PRIMITIVES` unless it is set (a user's value wins); oneDNN reads it when it makes its
first primitive, so it has no effect in a process that ran a oneDNN primitive before this import.
Measured: no slower (docs/crf.md, "Memory").

A process forked after torch's OpenMP thread pool has started (``nlp.pipe(n_process=2)`` on Linux,
where multiprocessing forks) hangs in its first parallel torch operation: the pool's threads do not
exist in the child. Importing this package registers :func:`_one_thread_after_fork`, which gives
torch one thread in every forked child (docs/component.md, "Several processes").
"""

import os
import sys

from .about import __version__

ONEDNN_PRIMITIVES = 128
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(ONEDNN_PRIMITIVES))

__all__ = ["ElmoEmbedder", "__version__"]


def _one_thread_after_fork() -> None:
    """In a forked child: torch's operations on the calling thread only, so none waits for a thread
    pool the child does not have. n forked workers share the parent's cores anyway; a child that
    wants more threads may call ``torch.set_num_threads`` itself (it then starts a new pool)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


os.register_at_fork(after_in_child=_one_thread_after_fork)


def __getattr__(name: str):
    if name == "ElmoEmbedder":
        from .bilm.embedder import ElmoEmbedder

        return ElmoEmbedder
    raise AttributeError(f"module 'spacy_elmo_mix' has no attribute {name!r}")
