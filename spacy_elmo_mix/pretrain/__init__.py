"""Pretraining ELMo biLMs on plain text: corpus and vocabulary, trainer, checkpoints and export.

The trained model is the native :class:`~spacy_elmo_mix.bilm.BiLM`; the trainer adds only what
training needs around it (dropout between layers, an adaptive softmax shared by both directions).
"""
from .corpus import Corpus, CorpusError, read_corpus
from .vocab import Vocabulary
from .config import TrainConfig
from .stream import StreamingData
from .trainer import Trainer

__all__ = ["Corpus", "CorpusError", "read_corpus", "Vocabulary", "TrainConfig", "Trainer", "StreamingData"]
