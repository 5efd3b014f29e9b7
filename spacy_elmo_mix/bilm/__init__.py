"""Native PyTorch ELMo biLM, weight-compatible with bilm-tf and AllenNLP."""

from .chars import batch_to_char_ids, word_to_char_ids
from .embedder import ElmoEmbedder
from .loading import load_bilm, save_bilm
from .modules import BiLM
from .options import BiLMOptions, CharCNNOptions, LSTMOptions
from .token_cache import TokenVectorCache
from .weights import load_weights, save_weights

__all__ = [
    "BiLM",
    "BiLMOptions",
    "CharCNNOptions",
    "LSTMOptions",
    "ElmoEmbedder",
    "TokenVectorCache",
    "batch_to_char_ids",
    "word_to_char_ids",
    "load_bilm",
    "save_bilm",
    "load_weights",
    "save_weights",
]
