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

from typing import Dict, List, Tuple

import numpy as np
import torch
from torch import Tensor, nn


def _check_rate(name: str, value: float) -> float:
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value!r}")
    return float(value)


class BiLSTMStack(nn.Module):
    """``depth`` bidirectional LSTM layers of ``width`` units per direction: [B, L, n_in] -> [B, L, 2 * width].

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
        """inputs: [B, L, n_in], zero past each length; lengths: [B] (0 allowed: a zero output row)."""
        lengths = lengths.cpu()
        live = lengths > 0
        if bool(live.all()):
            return self._stack(inputs, lengths)
        output = inputs.new_zeros(*inputs.shape[:2], self.lstms[-1].hidden_size * 2)
        if bool(live.any()):
            output[live] = self._stack(inputs[live], lengths[live])
        return output

    def _stack(self, inputs: Tensor, lengths: Tensor) -> Tensor:
        """The layers over a padded batch, without packing: the forward direction runs over the
        padded rows as they are (padding comes after a sentence's last token, where nobody reads),
        the backward direction over each sentence reversed within its own length (its padding then
        comes last too), so each direction runs as fused LSTM calls. A packed batch would run step by
        step, each step's slice of the packed input costing a zero-filled gradient of the whole input
        in the backward pass (quadratic in the sentence length).

        The padded steps are work too (a batch of 32 CoNLL sentences has about twice as many steps as
        tokens), so the sentences run sorted by length in a few groups (:func:`length_groups`), each
        group's calls only as long as its longest sentence. Each sentence's arithmetic is the same in
        any group; the dropout masks are drawn for the batch in its own order, as without groups."""
        total = inputs.shape[1]
        order = torch.argsort(lengths, stable=True)
        lengths = lengths[order]
        # on a GPU a step costs about the same for any number of rows: one group there
        groups = length_groups(lengths.tolist()) if inputs.device.type == "cpu" else [(0, len(lengths))]
        steps = torch.arange(total).unsqueeze(0)
        ends = lengths.unsqueeze(1)
        # t -> its mirror within the length
        mirror = torch.where(steps < ends, ends - 1 - steps, steps).to(inputs.device)
        real = (steps < ends).unsqueeze(2).to(device=inputs.device, dtype=inputs.dtype)
        order = order.to(inputs.device)
        x = inputs[order]
        for lstm in self.lstms:
            x = self._locked(x, order)
            params = self._recurrent_weights(lstm)
            outputs = []
            for start, stop in groups:
                longest = int(lengths[stop - 1])
                rows, index = x[start:stop, :longest], mirror[start:stop, :longest]
                forward = _lstm(rows, params, "", self.training)
                backward = _gather_steps(_lstm(_gather_steps(rows, index), params, "_reverse", self.training), index)
                outputs.append(nn.functional.pad(torch.cat([forward, backward], dim=2), (0, 0, 0, total - longest)))
            x = torch.cat(outputs) * real  # zero past each length, as documented
        return self._locked(x, order)[torch.argsort(order)]

    def _locked(self, x: Tensor, order: Tensor) -> Tensor:
        """``x`` ([B, L, D], the batch's sentences in ``order``) times one dropout mask per sentence,
        drawn for the sentences in their own order."""
        if not self.training or self.dropout == 0.0:
            return x
        keep = 1.0 - self.dropout
        return x * x.new_empty(x.shape[0], 1, x.shape[2]).bernoulli_(keep).div_(keep)[order]

    def _recurrent_weights(self, lstm: nn.LSTM) -> Dict[str, Tensor]:
        """The LSTM's parameters, hidden-to-hidden columns of dropped units zeroed in training."""
        params = dict(lstm.named_parameters())
        if not self.training or self.recurrent_dropout == 0.0:
            return params
        keep = 1.0 - self.recurrent_dropout
        for name, weight in params.items():
            if name.startswith("weight_hh"):
                mask = weight.new_empty(weight.shape[1]).bernoulli_(keep).div_(keep)
                params[name] = weight * mask
        return params


# The cost of a group of ``n`` sentences whose longest has ``t`` tokens, in row-steps of one LSTM
# direction: ``(n + STEP_OVERHEAD) * t + CALL_OVERHEAD``: a fused call's step costs a few rows'
# worth on top of its rows, and each group adds a dozen small operations to the forward and backward
# passes. Measured on batches of 32 CoNLL-2000 training sentences (2 x 100 units, one AMD EPYC core),
# these values split a batch into 2-3 groups and run the BiLSTM's forward and backward passes 1.5x
# as fast as one padded group (speed is flat from 2 to 4 groups); a whole training step of the
# BiLSTM-CRF 1.17x (bench/bilstm_groups.py). CPU only: on a GPU the stack runs one group.
STEP_OVERHEAD = 3.0
CALL_OVERHEAD = 30.0


def length_groups(lengths: List[int]) -> List[Tuple[int, int]]:
    """The cheapest split of a batch of sentences sorted by ``lengths`` (ascending, each >= 1) into
    contiguous groups ``[start, stop)`` under the cost model above (dynamic programming over the
    split points; one group when padding costs less than the calls)."""
    sizes = np.asarray(lengths, dtype=np.float64)
    if len(sizes) and bool((np.diff(sizes) < 0).any()):
        raise ValueError(f"lengths must be sorted ascending, got {lengths}")
    best = np.zeros(len(sizes) + 1)  # best[j]: cost of the first j sentences
    split = np.zeros(len(sizes) + 1, dtype=np.int64)
    starts = np.arange(len(sizes))
    for stop in range(1, len(sizes) + 1):
        costs = best[:stop] + (stop - starts[:stop] + STEP_OVERHEAD) * sizes[stop - 1] + CALL_OVERHEAD
        split[stop] = int(np.argmin(costs))
        best[stop] = costs[split[stop]]
    groups, stop = [], len(sizes)
    while stop > 0:
        groups.append((int(split[stop]), stop))
        stop = int(split[stop])
    return groups[::-1]


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
