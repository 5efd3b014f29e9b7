"""Pretraining ELMo biLMs on plain text: corpus and vocabulary, trainer, checkpoints and export.

The trained model is the native :class:`~spacy_elmo_mix.bilm.BiLM`; the trainer adds only what
training needs around it (dropout between layers, an adaptive softmax shared by both directions).
"""

from .config import TrainConfig
from .corpus import Corpus, CorpusError, read_corpus
from .stream import StreamingData
from .trainer import Trainer
from .vocab import Vocabulary

__all__ = ["Corpus", "CorpusError", "read_corpus", "Vocabulary", "TrainConfig", "Trainer", "StreamingData"]
