"""spacy-elmo-mix: ELMo for spaCy v3, with the combination of ELMo layers as a measurable setting.

Heavy libraries (torch, h5py) are imported lazily, so registering this plugin's entry points keeps
``spacy.blank`` fast.
"""

from .about import __version__

__all__ = ["ElmoEmbedder", "__version__"]


def __getattr__(name: str):
    if name == "ElmoEmbedder":
        from .bilm.embedder import ElmoEmbedder

        return ElmoEmbedder
    raise AttributeError(f"module 'spacy_elmo_mix' has no attribute {name!r}")
