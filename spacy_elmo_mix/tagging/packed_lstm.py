"""One bidirectional LSTM layer over a batch packed by steps, for the CPU: the paper's BiLSTM at the
speed of its matrix products.

The batch's tokens come as one ``[n_tokens, n_in]`` array (the sentences one after another). Sorted
by length, the sentences still running at step ``t`` are the first ``n_t`` of them, so each step's
rows are a contiguous block of a packed array, for each direction at once (the backward direction
runs over each sentence reversed within its own length, so it has the same blocks). There is no
padding anywhere:

- the input products of both directions are one matrix product over all tokens (``[N, n_in] x
  [n_in, 8 * width]``), as are, in the backward pass, the weight gradients and the input gradient
  (:func:`product`: oneDNN's where torch has it, numpy's otherwise);
- each step does one small recurrent product per direction and a few whole-array operations in
  numpy on ``[2, n_t, ...]`` blocks (numpy's per-call cost is a fraction of torch's at these sizes,
  and its ``tanh`` is vectorised where torch's float32 ``tanh`` is not);
- the sigmoid gates are computed as ``0.5 + 0.5 tanh(z / 2)``, their weights halved once per batch
  (halving is exact in binary floating point), so one ``tanh`` call activates all four gates;
- the backward pass folds every activation derivative into factors computed once for all tokens
  after the forward pass, leaving the recurrence with a handful of operations per step.

The arithmetic is the LSTM's (gates ``i, f, g, o`` as ``torch.nn.LSTM``, both biases added); only the
grouping of float32 sums differs from torch's kernels (``tests/test_bilstm.py`` bounds it, and
checks it against torch's packed ``nn.LSTM`` in float64). Forward and backward run in the inputs'
dtype (float32 or float64), on numpy arrays that share memory with the torch tensors.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor


def _onednn_linear() -> Optional[Callable]:
    """oneDNN's float32 product ``a @ b.T`` (``torch.ops.mkldnn``), or None where torch lacks it."""
    try:
        return torch.ops.mkldnn._linear_pointwise if torch.backends.mkldnn.is_available() else None
    except (AttributeError, RuntimeError):
        return None


_LINEAR = _onednn_linear()
# oneDNN makes a kernel per shape and keeps the last few (128 once this package is imported,
# spacy_elmo_mix.ONEDNN_PRIMITIVES); the token count varies from batch to batch, so it is padded
# with zeros to a multiple of this: about 8 counts per product shape for CoNLL batches of 32.
SHAPE_STEP = 64


def product(a: np.ndarray, b: np.ndarray, tokens: str = "rows") -> np.ndarray:
    """``a @ b.T`` for ``a`` [M, K] and ``b`` [N, K]: oneDNN's product in float32 where torch has
    it (faster than numpy's OpenBLAS for these shapes: docs/benchmarks.md, section "Training the
    paper's network (issue 42)"), numpy's otherwise (float64 included). ``tokens``: which of
    ``a``'s dimensions is the token
    count, ``"rows"`` (M) or ``"inner"`` (K); that one is padded with zeros to a multiple of
    :data:`SHAPE_STEP` (zero rows and columns add nothing to any sum), the fixed ones are not
    (padding a width of 200 to 256 would cost a quarter more arithmetic)."""
    if _LINEAR is None or a.dtype != np.float32 or b.dtype != np.float32:
        return a @ b.T
    if tokens not in ("rows", "inner"):
        raise ValueError(f"tokens must be 'rows' or 'inner', got {tokens!r}")
    rows, inner = a.shape
    if tokens == "rows":
        a, b = _zero_padded(a, _rounded(rows), inner), _zero_padded(b, b.shape[0], inner)
    else:
        a, b = _zero_padded(a, rows, _rounded(inner)), _zero_padded(b, b.shape[0], _rounded(inner))
    return _LINEAR(torch.from_numpy(a), torch.from_numpy(b), None, "none", [], "").numpy()[:rows]


def _rounded(size: int) -> int:
    return -(-size // SHAPE_STEP) * SHAPE_STEP


def _zero_padded(x: np.ndarray, rows: int, columns: int) -> np.ndarray:
    """``x`` as a C-contiguous [rows, columns] array, zeros beyond its own shape."""
    if x.shape == (rows, columns) and x.flags.c_contiguous:
        return x
    padded = np.zeros((rows, columns), dtype=x.dtype)
    padded[: x.shape[0], : x.shape[1]] = x
    return padded


# Internal gate order: g (tanh), then i, f, o (sigmoids). torch.nn.LSTM's is i, f, g, o.
_FROM_TORCH = (2, 0, 1, 3)


class StepLayout:
    """Where each token of a batch sits in the step-packed layout of both directions.

    lengths: tokens per sentence, in the batch's order (0 allowed: such a sentence has no rows).
    """

    def __init__(self, lengths: Sequence[int]) -> None:
        sizes = np.asarray(lengths, dtype=np.int64).reshape(-1)
        if bool((sizes < 0).any()):
            raise ValueError(f"lengths must be >= 0, got {sizes.tolist()}")
        starts = np.cumsum(sizes) - sizes
        order = np.argsort(-sizes, kind="stable")
        steps = int(sizes.max()) if len(sizes) else 0
        self.counts = (sizes[order][None, :] > np.arange(steps)[:, None]).sum(1)  # n_t
        self.offsets = np.cumsum(self.counts) - self.counts
        step = np.repeat(np.arange(steps), self.counts)
        row = np.arange(len(step)) - self.offsets[step]
        sentence = order[row]
        self.n_tokens = int(sizes.sum())
        # packed row -> token, for each direction (the backward one reads each sentence reversed)
        self.forward_tokens = starts[sentence] + step
        self.backward_tokens = starts[sentence] + sizes[sentence] - 1 - step
        # rows of steps >= 1 -> the row of the same sentence one step earlier
        self.first_rows = int(self.counts[0]) if steps else 0  # the rows of step 0
        first = self.first_rows
        self.previous_rows = self.offsets[step[first:] - 1] + row[first:]
        self.steps = steps

    def pack(self, tokens: np.ndarray, width: int) -> np.ndarray:
        """``[N, 2 * width]`` (forward direction's columns first) -> ``[2, N, width]`` packed rows."""
        packed = np.empty((2, self.n_tokens, width), dtype=tokens.dtype)
        np.take(tokens[:, :width], self.forward_tokens, axis=0, out=packed[0])
        np.take(tokens[:, width:], self.backward_tokens, axis=0, out=packed[1])
        return packed

    def unpack(self, packed: np.ndarray) -> np.ndarray:
        """``[2, N, width]`` packed rows -> ``[N, 2 * width]`` in token order (inverse of :meth:`pack`)."""
        width = packed.shape[2]
        tokens = np.empty((self.n_tokens, 2 * width), dtype=packed.dtype)
        tokens[self.forward_tokens, :width] = packed[0]
        tokens[self.backward_tokens, width:] = packed[1]
        return tokens


def _stacked(forward: Tensor, backward: Tensor) -> np.ndarray:
    """Two directions' ``[4 * width, ...]`` parameters in internal gate order: ``[2, 4 * width, ...]``."""
    both = torch.stack([forward.detach(), backward.detach()]).numpy()
    blocks = both.reshape(2, 4, -1, *both.shape[2:])
    return np.ascontiguousarray(blocks[:, _FROM_TORCH]).reshape(both.shape)


def _to_torch_order(grad: np.ndarray) -> Tensor:
    """``[4 * width, ...]`` in internal gate order -> torch's gate order."""
    blocks = grad.reshape(4, -1, *grad.shape[1:])
    inverse = np.argsort(_FROM_TORCH)
    return torch.from_numpy(np.ascontiguousarray(blocks[inverse]).reshape(grad.shape))


class PackedBiLSTMLayer(torch.autograd.Function):
    """``apply(x, layout, w_ih, w_hh, b_ih, b_hh, w_ih_reverse, w_hh_reverse, b_ih_reverse,
    b_hh_reverse)``: the layer's ``[N, 2 * width]`` output (forward direction first), from zero
    states; the weights as ``torch.nn.LSTM``'s (one layer, bidirectional)."""

    @staticmethod
    def forward(ctx, x: Tensor, layout: StepLayout, *weights: Tensor) -> Tensor:
        w_ih, w_hh, bias = _layer_weights(weights)
        width = w_hh.shape[2]
        halve = np.ones(4 * width, dtype=w_ih.dtype)
        halve[width:] = 0.5  # the sigmoid gates' pre-activations, halved: sigmoid(z) = 0.5 + 0.5 tanh(z / 2)
        inputs = x.detach().numpy()
        gates = layout.pack(product(inputs, (w_ih * halve[:, None]).reshape(-1, inputs.shape[1])), 4 * width)
        gates += (bias * halve)[:, None, :]
        hidden, cells, tanh_cells = _run_forward(layout, gates, w_hh * halve[:, None], width)
        ctx.layout, ctx.weights = layout, (w_ih, w_hh)
        ctx.save_for_backward(x)
        ctx.state = (gates, hidden, cells, tanh_cells)
        return torch.from_numpy(layout.unpack(hidden))

    @staticmethod
    def backward(ctx, d_output: Tensor) -> Tuple:
        layout, (w_ih, w_hh) = ctx.layout, ctx.weights
        (x,) = ctx.saved_tensors
        gates, hidden, cells, tanh_cells = ctx.state
        width = w_hh.shape[2]
        d_gates = _run_backward(layout, layout.pack(d_output.numpy(), width), gates, cells, tanh_cells, w_hh)
        first = layout.first_rows
        previous = hidden[:, layout.previous_rows]
        d_w_hh = np.stack([product(d_gates[d, first:].T, previous[d].T, tokens="inner") for d in range(2)])
        d_tokens = layout.unpack(d_gates)  # [N, 8 * width]: both directions' gate gradients
        inputs = x.detach().numpy()
        d_w_ih = product(d_tokens.T, inputs.T, tokens="inner").reshape(2, 4 * width, -1)
        d_bias = d_tokens.sum(0).reshape(2, 4 * width)
        d_x = None
        if ctx.needs_input_grad[0]:
            d_x = torch.from_numpy(product(d_tokens, w_ih.reshape(-1, inputs.shape[1]).T))
        grads = []
        for direction in range(2):
            b = _to_torch_order(d_bias[direction])
            grads += [_to_torch_order(d_w_ih[direction]), _to_torch_order(d_w_hh[direction]), b, b.clone()]
        return (d_x, None, *grads)


def _layer_weights(weights: Sequence[Tensor]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``[2, 4W, n_in]`` input weights, ``[2, 4W, W]`` recurrent weights and ``[2, 4W]`` summed
    biases, both directions, internal gate order."""
    w_ih_f, w_hh_f, b_ih_f, b_hh_f, w_ih_b, w_hh_b, b_ih_b, b_hh_b = weights
    return _stacked(w_ih_f, w_ih_b), _stacked(w_hh_f, w_hh_b), _stacked(b_ih_f + b_hh_f, b_ih_b + b_hh_b)


def _run_forward(
    layout: StepLayout, gates: np.ndarray, w_hh: np.ndarray, width: int
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The recurrence. ``gates`` ([2, N, 4W], input products and biases, sigmoid gates halved) are
    replaced by the gates' values; returns the hidden states, cells and ``tanh`` of the cells."""
    shape = (2, layout.n_tokens, width)
    hidden, cells, tanh_cells = np.empty(shape, gates.dtype), np.empty(shape, gates.dtype), np.empty(shape, gates.dtype)
    first = layout.first_rows
    recurrent = np.empty((2, first, 4 * width), gates.dtype)
    kept = np.empty((2, first, width), gates.dtype)
    w_hh_t = np.ascontiguousarray(w_hh.transpose(0, 2, 1))
    previous = 0
    for start, n in zip(layout.offsets.tolist(), layout.counts.tolist()):
        step, c = gates[:, start : start + n], cells[:, start : start + n]
        if start:
            np.matmul(hidden[:, previous : previous + n], w_hh_t, out=recurrent[:, :n])
            step += recurrent[:, :n]
        np.tanh(step, out=step)
        sigmoids = step[:, :, width:]
        sigmoids *= 0.5
        sigmoids += 0.5
        np.multiply(step[:, :, width : 2 * width], step[:, :, :width], out=c)  # i * g
        if start:
            np.multiply(step[:, :, 2 * width : 3 * width], cells[:, previous : previous + n], out=kept[:, :n])
            c += kept[:, :n]  # + f * c_{t-1}
        np.tanh(c, out=tanh_cells[:, start : start + n])
        np.multiply(step[:, :, 3 * width :], tanh_cells[:, start : start + n], out=hidden[:, start : start + n])
        previous = start
    return hidden, cells, tanh_cells


def _run_backward(
    layout: StepLayout,
    d_hidden: np.ndarray,
    gates: np.ndarray,
    cells: np.ndarray,
    tanh_cells: np.ndarray,
    w_hh: np.ndarray,
) -> np.ndarray:
    """The gradient of the gates' pre-activations ([2, N, 4W]) from that of the hidden states
    (``d_hidden``, packed; accumulates the recurrent gradient in place)."""
    width = cells.shape[2]
    g, i, f, o = (gates[:, :, k * width : (k + 1) * width] for k in range(4))
    previous_cells = np.zeros_like(cells)
    first = layout.first_rows
    previous_cells[:, first:] = cells[:, layout.previous_rows]
    # d pre-activation = factor * (dc for g, i, f; dh for o), and dc = dh * o * (1 - tanh(c)^2) + carry
    factors = np.empty_like(gates)
    factors[:, :, :width] = i * (1 - g * g)
    factors[:, :, width : 2 * width] = g * i * (1 - i)
    factors[:, :, 2 * width : 3 * width] = previous_cells * f * (1 - f)
    factors[:, :, 3 * width :] = tanh_cells * o * (1 - o)
    d_cell_factor = o * (1 - tanh_cells * tanh_cells)
    del previous_cells
    d_gates = np.empty_like(gates)
    d_cells = np.empty_like(cells)
    carry = np.empty((2, first, width), gates.dtype)
    recurrent = np.empty((2, first, width), gates.dtype)
    factors4 = factors.reshape(2, -1, 4, width)
    d_gates4 = d_gates.reshape(2, -1, 4, width)
    later = None  # (start, n) of step t + 1
    for start, n in zip(layout.offsets.tolist()[::-1], layout.counts.tolist()[::-1]):
        dh, dc = d_hidden[:, start : start + n], d_cells[:, start : start + n]
        if later is not None:
            s, m = later
            np.matmul(d_gates[:, s : s + m], w_hh, out=recurrent[:, :m])
            dh[:, :m] += recurrent[:, :m]
        np.multiply(dh, d_cell_factor[:, start : start + n], out=dc)
        if later is not None:
            dc[:, : later[1]] += carry[:, : later[1]]
        np.multiply(dc[:, :, None, :], factors4[:, start : start + n, :3], out=d_gates4[:, start : start + n, :3])
        np.multiply(dh, factors4[:, start : start + n, 3], out=d_gates4[:, start : start + n, 3])
        if start:
            np.multiply(dc, f[:, start : start + n], out=carry[:, :n])
        later = (start, n)
    return d_gates
