"""The training-time language model: the native biLM plus dropout and a shared adaptive softmax.

Dropout is applied here, between the biLM's modules (token vectors, LSTM inputs, top outputs), so the
exported :class:`~spacy_elmo_mix.bilm.BiLM` is unchanged; in eval mode :meth:`LanguageModel.encode`
computes exactly what ``BiLM.forward`` computes.
"""

from __future__ import annotations

from typing import List, Tuple

from torch import Tensor, nn

from ..bilm import BiLM, BiLMOptions
from .batches import IGNORE, Batch
from .softmax import adaptive_softmax


class LanguageModel(nn.Module):
    """Forward and backward language models over a :class:`BiLM`.

    options: the biLM's size.
    vocab_size: number of words the softmax predicts.
    dropout: dropout probability on LSTM inputs and on the top outputs (training mode only).
    """

    def __init__(self, options: BiLMOptions, vocab_size: int, dropout: float = 0.1):
        super().__init__()
        self.bilm = BiLM(options)
        self.softmax = adaptive_softmax(options.lstm.projection_dim, vocab_size)
        self.dropout = nn.Dropout(dropout)

    def encode(self, batch: Batch) -> Tuple[List[Tensor], List[Tensor]]:
        """Packed outputs of every layer, per direction: ``([token, lstm1, ...], [token, lstm1, ...])``.

        Each direction's rows follow its own packed order (the backward one reads examples reversed).
        """
        tokens = self.bilm.char_cnn(batch.char_ids)
        skip = self.bilm.options.lstm.use_skip_connections
        directions = []
        for stack, index in zip(self.bilm.stacks, (batch.forward_index, batch.backward_index)):
            x = tokens[index]
            layers = [x]
            for k, layer in enumerate(stack):
                out = layer(self.dropout(x), batch.batch_sizes)
                x = out + x if k > 0 and skip else out
                layers.append(x)
            directions.append(layers)
        return directions[0], directions[1]

    def forward(self, batch: Batch) -> Tuple[Tensor, Tensor]:
        """Summed negative log-likelihood of the batch's targets: ``(forward, backward)``."""
        forward_layers, backward_layers = self.encode(batch)
        return (
            self._nll(forward_layers[-1], batch.forward_targets),
            self._nll(backward_layers[-1], batch.backward_targets),
        )

    def _nll(self, top: Tensor, targets: Tensor) -> Tensor:
        keep = targets != IGNORE
        return -self.softmax(self.dropout(top[keep]), targets[keep]).output.sum()
