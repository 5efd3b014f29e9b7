"""Native PyTorch ELMo biLM, weight-compatible with bilm-tf and AllenNLP."""
from .options import BiLMOptions, CharCNNOptions, LSTMOptions
from .chars import batch_to_char_ids, word_to_char_ids
from .modules import BiLM
from .weights import load_weights, save_weights
from .loading import load_bilm, save_bilm
from .token_cache import TokenVectorCache
from .embedder import ElmoEmbedder

__all__ = [
    "BiLM", "BiLMOptions", "CharCNNOptions", "LSTMOptions", "ElmoEmbedder", "TokenVectorCache",
    "batch_to_char_ids", "word_to_char_ids", "load_bilm", "save_bilm", "load_weights", "save_weights",
]
