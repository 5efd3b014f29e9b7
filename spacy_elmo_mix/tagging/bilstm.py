"""The paper's BiLSTM in plain torch: stacked bidirectional LSTMs with variational dropout.

Variational (Gal & Ghahramani 2016) dropout keeps one mask for all time steps, as the paper's
Keras network does (``LSTM(dropout=..., recurrent_dropout=...)``):

- ``dropout``: a locked mask over the features of each layer's input (the first layer's input is
  ELMo) and of the last layer's output, one mask per sentence for all its tokens;
- ``recurrent_dropout``: a mask over the hidden units that enter the next step (``h_{t-1}``),
  applied as zeroed columns of the hidden-to-hidden weights, so the fused LSTM kernel still runs;
  one mask per batch and direction (the paper's Keras code draws one per sentence).

Masks scale kept units by ``1 / (1 - p)``; in ``eval()`` mode nothing is dropped.
"""

from __future__ import annotations

from typing import Dict, cast

import torch
from torch import Tensor, nn

from .packed_lstm import PackedBiLSTMLayer, StepLayout


def _check_rate(name: str, value: float) -> float:
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value!r}")
    return float(value)


class BiLSTMStack(nn.Module):
    """``depth`` bidirectional LSTM layers of ``width`` units per direction: [N, n_in] -> [N, 2 * width]
    over a batch of sentences whose N tokens come one after another.

    n_in: input features. width: units per direction. depth: layers.
    dropout: variational dropout rate of each layer's input and of the output.
    recurrent_dropout: variational dropout rate of the recurrent hidden state.
    """

    def __init__(self, n_in: int, width: int, depth: int, dropout: float, recurrent_dropout: float) -> None:
        super().__init__()
        if n_in < 1 or width < 1 or depth < 1:
            raise ValueError(f"n_in, width and depth must be positive, got {n_in}, {width}, {depth}")
        self.dropout = _check_rate("dropout", dropout)
        self.recurrent_dropout = _check_rate("recurrent_dropout", recurrent_dropout)
        sizes = [n_in] + [2 * width] * (depth - 1)
        self.lstms = nn.ModuleList(nn.LSTM(size, width, batch_first=True, bidirectional=True) for size in sizes)

    def forward(self, inputs: Tensor, lengths: Tensor) -> Tensor:
        """inputs: [N, n_in], the batch's sentences one after another (N = lengths.sum()); lengths:
        [B] (0 allowed). Returns [N, 2 * width], forward direction first.

        On the CPU each layer runs as one step-packed kernel (``tagging.packed_lstm``: no padding,
        both directions at once); elsewhere (a GPU) as torch's fused LSTM over the padded batch
        (:meth:`padded`), which is also the reference the kernel is tested against."""
        lengths = lengths.cpu()
        if inputs.shape[0] != int(lengths.sum()):
            raise ValueError(f"inputs has {inputs.shape[0]} rows, the lengths sum to {int(lengths.sum())}")
        if inputs.device.type != "cpu":
            return _unpad(self.padded(_pad(inputs, lengths), lengths), lengths)
        layout = StepLayout(lengths.tolist())
        sentence = torch.repeat_interleave(torch.arange(len(lengths)), lengths)
        x = self._locked_tokens(inputs, sentence, len(lengths))
        for lstm in self.lstms:
            params = self._recurrent_weights(lstm)
            x = PackedBiLSTMLayer.apply(
                x, layout, *(params[f"{name}{suffix}"] for suffix in _SUFFIXES for name in _NAMES)
            )
            x = self._locked_tokens(x, sentence, len(lengths))
        return x

    def _locked_tokens(self, x: Tensor, sentence: Tensor, n_sentences: int) -> Tensor:
        """``x`` ([N, D]) times one dropout mask per sentence (``sentence``: each token's), drawn
        for the sentences in the batch's order (as :meth:`_locked`)."""
        if not self.training or self.dropout == 0.0:
            return x
        keep = 1.0 - self.dropout
        return x * x.new_empty(n_sentences, x.shape[1]).bernoulli_(keep).div_(keep)[sentence]

    def padded(self, inputs: Tensor, lengths: Tensor) -> Tensor:
        """The stack over a padded batch ([B, L, n_in], zero past each length; lengths [B], 0
        allowed) -> [B, L, 2 * width], zero past each length, as torch's fused LSTM calls: the
        forward direction over the padded rows as they are (padding comes after a sentence's last
        token, where nobody reads), the backward direction over each sentence reversed within its
        own length (its padding then comes last too). Without empty sentences the dropout masks are
        drawn as in :meth:`forward`, so both give the same results up to float rounding (with them,
        the empty rows draw no masks here)."""
        lengths = lengths.cpu()
        live = lengths > 0
        if not bool(live.all()):
            output = inputs.new_zeros(*inputs.shape[:2], cast(nn.LSTM, self.lstms[-1]).hidden_size * 2)
            if bool(live.any()):
                output[live] = self.padded(inputs[live], lengths[live])
            return output
        steps = torch.arange(inputs.shape[1]).unsqueeze(0)
        ends = lengths.unsqueeze(1)
        # t -> its mirror within the length
        mirror = torch.where(steps < ends, ends - 1 - steps, steps).to(inputs.device)
        real = (steps < ends).unsqueeze(2).to(device=inputs.device, dtype=inputs.dtype)
        x = self._locked(inputs)
        for lstm in self.lstms:
            params = self._recurrent_weights(lstm)
            forward = _lstm(x, params, "", self.training)
            backward = _gather_steps(_lstm(_gather_steps(x, mirror), params, "_reverse", self.training), mirror)
            x = self._locked(torch.cat([forward, backward], dim=2) * real)
        return x

    def _locked(self, x: Tensor) -> Tensor:
        """``x`` ([B, L, D]) times one dropout mask per sentence, for all its steps."""
        if not self.training or self.dropout == 0.0:
            return x
        keep = 1.0 - self.dropout
        return x * x.new_empty(x.shape[0], 1, x.shape[2]).bernoulli_(keep).div_(keep)

    def _recurrent_weights(self, lstm: nn.Module) -> Dict[str, Tensor]:
        """The LSTM's parameters, hidden-to-hidden columns of dropped units zeroed in training."""
        params: Dict[str, Tensor] = dict(lstm.named_parameters())
        if not self.training or self.recurrent_dropout == 0.0:
            return params
        keep = 1.0 - self.recurrent_dropout
        for name, weight in params.items():
            if name.startswith("weight_hh"):
                mask = weight.new_empty(weight.shape[1]).bernoulli_(keep).div_(keep)
                params[name] = weight * mask
        return params


_NAMES = ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")
_SUFFIXES = ("", "_reverse")


def _pad(x: Tensor, lengths: Tensor) -> Tensor:
    """[N, D] tokens -> [B, L, D], zero past each length."""
    rows = list(torch.split(x, lengths.tolist()))
    return nn.utils.rnn.pad_sequence(rows, batch_first=True) if rows else x.new_zeros(0, 0, x.shape[1])


def _unpad(x: Tensor, lengths: Tensor) -> Tensor:
    """[B, L, D] -> [N, D]: each sentence's real positions, one after another."""
    real = torch.arange(x.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)
    return x[real.to(x.device)]


def _lstm(x: Tensor, params: Dict[str, Tensor], suffix: str, training: bool) -> Tensor:
    """One direction of a one-layer ``nn.LSTM``'s parameters (``suffix`` "" or "_reverse") run
    forward over ``x`` ([B, L, n_in], batch first) from zero states: [B, L, hidden]."""
    weights = [params[f"{name}_l0{suffix}"] for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    zeros = x.new_zeros(1, x.shape[0], weights[1].shape[1])
    output, _, _ = torch.lstm(x, (zeros, zeros), weights, True, 1, 0.0, training, False, True)
    return output


def _gather_steps(x: Tensor, index: Tensor) -> Tensor:
    """``x[b, index[b, t]]`` for every b, t: [B, L, D] reordered along the steps."""
    return x.gather(1, index.unsqueeze(2).expand(-1, -1, x.shape[2]))
