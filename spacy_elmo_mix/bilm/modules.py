"""The ELMo biLM as plain PyTorch modules (no thinc, no spaCy).

Parameters keep the bilm-tf conventions (TF gate order i, j, f, o with the +1 forget bias added at
run time, highway ``carry`` gate as in TF), so loading and saving ``weights.hdf5`` are plain copies and
a round trip is bit-identical.

Batches are processed in PyTorch's packed layout: sentences sorted by length, one row per real
position and time step, so no work is done on padding. The input projection of each LSTM is one
matrix product over all positions (the first layer's over the batch's distinct words: each word's
vector is the same wherever it occurs); the recurrence then touches only the rows still active. The
backward LSTMs read each sentence reversed (a permutation of the packed rows), so both directions
share one implementation. Every sentence starts from a zero state: results do not depend on batching.

The two directions never mix (each layer reads its own direction's layer below): with two or more
torch threads the forward and backward stacks run at the same time, each on half of the threads (see ``BiLM.concurrent_directions``), because one recurrent step's
small matrix product cannot use a second core well.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Callable, List, Optional, Sequence, Tuple, TypeVar, cast

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from ..errors import ElmoInputError
from .chars import PAD_CHAR, sentence_markers
from .kernels import PACKED_KERNELS, check_kernels, default_kernels, drop_packed, prepacked, product, step_product
from .options import BiLMOptions, CharCNNOptions, LSTMOptions
from .token_cache import TokenVectorCache


class Highway(nn.Module):
    """``y = c * relu(W_t x + b_t) + (1 - c) * x`` with ``c = sigmoid(W_c x + b_c)`` (bilm-tf's carry gate).

    ``weight`` stacks ``W_t`` above ``W_c`` (each ``[dim, dim]``, torch ``Linear`` orientation).
    """

    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(2 * dim, dim))
        self.bias = nn.Parameter(torch.zeros(2 * dim))
        nn.init.normal_(self.weight, std=(1.0 / dim) ** 0.5)

    def forward(self, x: Tensor, dtype: torch.dtype = torch.float32, kernels: str = "torch") -> Tensor:
        """dtype: of the matrix product (see ``BiLM.set_compute_dtype``); the gating stays float32.
        kernels: the library of a float32 product (see ``BiLM.set_kernels``)."""
        transform, carry = _linear(x, self.weight, self.bias, dtype, kernels).chunk(2, dim=-1)
        # sigmoid(-z) = 1 - c, computed as AllenNLP does (it stores -W_carry).
        keep = torch.sigmoid(-carry)
        return keep * x + (1 - keep) * torch.relu(transform)


class CharCNN(nn.Module):
    """Character embedding, convolutions with max-pooling, highway layers and a linear projection."""

    # nn.ModuleLists, declared for the type checker as the sequences of layers they hold
    convolutions: Sequence[nn.Conv1d]
    highways: Sequence[Highway]

    def __init__(self, opts: CharCNNOptions, output_dim: int):
        super().__init__()
        self.opts = opts
        # Row 0 (padding) stays zero; rows 1.. are the file's ``char_embed`` rows.
        self.char_embedding = nn.Parameter(torch.empty(262, opts.char_embedding_dim).uniform_(-1, 1))
        with torch.no_grad():
            self.char_embedding[0].zero_()
        self.convolutions = cast(
            Sequence[nn.Conv1d],
            nn.ModuleList(nn.Conv1d(opts.char_embedding_dim, n, kernel_size=w) for w, n in opts.filters),
        )
        self.highways = cast(Sequence[Highway], nn.ModuleList(Highway(opts.n_filters) for _ in range(opts.n_highway)))
        self.projection = nn.Linear(opts.n_filters, output_dim)
        self.activation = torch.relu if opts.activation == "relu" else torch.tanh
        # Convolutions and matrix products in this dtype (see BiLM.set_compute_dtype), float32
        # products on this kernel set (BiLM sets its CPU's default, see BiLM.set_kernels).
        self.compute_dtype = torch.float32
        self.kernels = "torch"

    def forward(self, char_ids: Tensor) -> Tensor:
        """``[n_words, max_chars]`` character ids -> ``[n_words, output_dim]`` token vectors (float32)."""
        low = self.compute_dtype
        char_ids = _trim_padding(char_ids, max(width for width, _ in self.opts.filters))
        x = torch.nn.functional.embedding(char_ids, self.char_embedding).transpose(1, 2)
        if low != torch.float32:
            # NCHW [n_words, char_dim, 1, max_chars] in channels-last layout (a view of the embeddings).
            x = x.unsqueeze(2).to(low, memory_format=torch.channels_last)
        x = torch.cat([self.activation(_pooled_conv(x, conv, low)) for conv in self.convolutions], dim=-1)
        for highway in self.highways:
            x = highway(x, low, self.kernels)
        return _linear(x, self.projection.weight, self.projection.bias, low, self.kernels)


class LSTMLayer(nn.Module):
    """One direction of one layer: LSTM with cell clipping, a projection and projection clipping.

    Parameters in bilm-tf's gate order (i, j, f, o), ``Linear`` orientation:
    ``w_input [4*dim, input_dim]``, ``w_recurrent [4*dim, projection_dim]``, ``bias [4*dim]`` (without
    the +1 forget bias, which is added at run time), ``w_projection [projection_dim, dim]``.
    """

    forget_bias: Tensor  # a buffer (register_buffer), declared for the type checker

    def __init__(self, input_dim: int, opts: LSTMOptions):
        super().__init__()
        dim, proj = opts.dim, opts.projection_dim
        self.dim, self.cell_clip, self.proj_clip = dim, opts.cell_clip, opts.proj_clip
        self.w_input = nn.Parameter(torch.empty(4 * dim, input_dim))
        self.w_recurrent = nn.Parameter(torch.empty(4 * dim, proj))
        self.bias = nn.Parameter(torch.zeros(4 * dim))
        self.w_projection = nn.Parameter(torch.empty(proj, dim))
        for w in (self.w_input, self.w_recurrent, self.w_projection):
            nn.init.uniform_(w, -((1.0 / w.shape[1]) ** 0.5), (1.0 / w.shape[1]) ** 0.5)
        forget = torch.zeros(4 * dim)
        forget[2 * dim : 3 * dim] = 1.0
        self.register_buffer("forget_bias", forget, persistent=False)
        # Matrix products in this dtype (bfloat16: opt-in, see BiLM.set_compute_dtype); gates, the
        # cell state, clipping and outputs always stay float32.
        self.compute_dtype = torch.float32
        # The library of the float32 inference products (BiLM sets its CPU's default, see
        # BiLM.set_kernels and kernels.py).
        self.kernels = "torch"

    def forward(self, x: Tensor, batch_sizes: List[int], rows: Optional[Tensor] = None) -> Tensor:
        """Packed input ``[n_rows, input_dim]`` -> packed output ``[n_rows, projection_dim]``.

        rows: when given, ``x`` holds distinct input rows and packed row ``r`` reads ``x[rows[r]]``:
        the input product then runs once per distinct row (a batch's first layer reads each distinct
        word's vector, about half of its positions for 20-30-token sentences).
        """
        dim, low = self.dim, self.compute_dtype
        w_in, w_rec, w_proj = (_cast(w, low).t() for w in (self.w_input, self.w_recurrent, self.w_projection))
        # Same summation order as AllenNLP: (x W_in) + (h W_rec + b), with the +1 folded into b. A
        # bfloat16 input product stays bfloat16 (its rounded sums are what float32 would hold) and
        # each step adds its rows: one conversion of all rows cost as much as the product.
        projected = product(x, w_in, None, self.kernels) if low == torch.float32 else x.to(low) @ w_in
        if rows is not None:
            projected = projected[rows]
        bias = self.bias + self.forget_bias
        h: Optional[Tensor] = None
        c = x.new_zeros(batch_sizes[0], dim)
        tanh = torch.tanh if low == torch.float32 else _tanh_by_sigmoid
        outputs = []
        # Packed weights: float32 on the packed kernel sets (MKL's or oneDNN's), oneDNN's for bfloat16.
        packed = self.kernels in PACKED_KERNELS or low != torch.float32
        rec = prepacked(self.w_recurrent, batch_sizes[0], low, self.kernels) if packed else None
        proj = prepacked(self.w_projection, batch_sizes[0], low, self.kernels) if packed else None
        # split, not a slice per step: a slice's backward fills a zero tensor of all rows each step.
        for n, step_input in zip(batch_sizes, projected.split(batch_sizes)):
            if h is None:  # the first step: the state is zero, so is its recurrent product (exactly)
                gates = step_input + bias
            else:
                gates = step_product(h[:n], w_rec, bias, rec, self.kernels).add_(step_input)
            i, j, f, o = gates.split(dim, dim=1)
            c = torch.addcmul(torch.sigmoid(i) * tanh(j), torch.sigmoid(f), c[:n])
            if self.cell_clip:
                c = c.clamp(-self.cell_clip, self.cell_clip)
            h = step_product(torch.sigmoid(o) * tanh(c), w_proj, None, proj, self.kernels)
            if self.proj_clip:
                h = h.clamp(-self.proj_clip, self.proj_clip)
            outputs.append(h)
        return torch.cat(outputs)


def _tanh_by_sigmoid(x: Tensor) -> Tensor:
    """``tanh(x)`` as ``2 sigmoid(2x) - 1``: within 2^-22 of it (absolute; tested), several times
    faster on CPUs where torch's float32 ``tanh`` is not vectorized and its sigmoid is
    (docs/benchmarks.md, section "AMD EPYC with AVX-512, in detail").
    For the bfloat16 path's gates only: the exact path keeps ``torch.tanh``."""
    return torch.sigmoid(x * 2).mul(2).sub_(1)  # not mul_: sigmoid's backward reads its output


_CAST_ATTR = "_low_precision_copy"  # where _cast keeps a weight's cast copy


def _cast(weight: Tensor, dtype: torch.dtype) -> Tensor:
    """``weight`` in ``dtype``. Without gradients the cast is kept on the weight and reused until the
    weight changes (version counter or storage), so inference does not cast every weight per call."""
    if weight.dtype == dtype:
        return weight
    if torch.is_grad_enabled() and weight.requires_grad:
        return weight.to(dtype)
    key = (dtype, weight._version, weight.data_ptr())
    kept = getattr(weight, _CAST_ATTR, None)
    if kept is None or kept[0] != key:
        kept = (key, weight.detach().to(dtype))
        setattr(weight, _CAST_ATTR, kept)
    return kept[1]


def _linear(x: Tensor, weight: Tensor, bias: Tensor, dtype: torch.dtype, kernels: str) -> Tensor:
    """``x @ weight.T + bias`` with the product in ``dtype``, as float32; float32 on ``kernels``
    (exactly ``F.linear`` with ``torch``)."""
    if dtype == torch.float32:
        return product(x, weight.t(), bias, kernels)
    return torch.nn.functional.linear(x.to(dtype), _cast(weight, dtype)).float().add_(bias)


def _trim_padding(char_ids: Tensor, widest: int) -> Tensor:
    """The leading columns of ``char_ids`` that max-pooled convolutions up to ``widest`` wide need.

    After each token's end-of-word marker come identical padding ids (all ids of an absent token are
    0), so all windows lying wholly in a row's padding have one value. Keeping ``widest`` columns
    after the longest token's last character keeps such a window for every token and width wherever
    the full row has one, and drops only windows equal to it: every max over positions is unchanged.
    """
    used = torch.nonzero(((char_ids != PAD_CHAR) & (char_ids != 0)).any(dim=0))
    width = int(used[-1]) + 1 + widest if len(used) else widest
    return char_ids[:, :width] if width < char_ids.shape[1] else char_ids


def _pooled_conv(x: Tensor, conv: nn.Conv1d, dtype: torch.dtype) -> Tensor:
    """``conv`` over character embeddings ``x``, max-pooled over positions, as float32 ``[n, filters]``.

    float32: ``x`` is ``[n, char_dim, positions]``; exactly ``conv(x).amax(-1)``. bfloat16: ``x`` is
    ``[n, char_dim, 1, positions]`` in channels-last layout and the convolution is 2-D, which puts the
    filters innermost, so the max over positions runs several times faster than over conv1d's
    innermost axis (equal values; not used for float32, whose rounding it would change); the bias,
    constant over positions, is added in float32 after the max.
    """
    if dtype == torch.float32:
        return conv(x).amax(dim=-1)
    weight = _cast(conv.weight, dtype).unsqueeze(2).contiguous(memory_format=torch.channels_last)
    assert conv.bias is not None  # CharCNN's convolutions have biases
    return torch.nn.functional.conv2d(x, weight).amax(dim=(2, 3)).float().add_(conv.bias)


class BiLM(nn.Module):
    """The ELMo bidirectional language model: char-CNN token vectors and two stacks of LSTMs.

    ``forward`` returns all ELMo layers (layer 0: the token vector twice; layer k: the k-th LSTM
    layer's forward and backward outputs), with ``<S>``/``</S>`` added and removed internally.
    """

    # declared for the type checker: nn.ModuleLists as the sequences of layers they hold, a buffer
    stacks: Sequence[Sequence[LSTMLayer]]
    markers: Tensor

    def __init__(self, options: BiLMOptions):
        super().__init__()
        self.options = options
        lstm = options.lstm
        self.char_cnn = CharCNN(options.char_cnn, lstm.projection_dim)
        # stacks[0] reads left to right, stacks[1] right to left; layers never mix directions.
        self.stacks = cast(
            Sequence[Sequence[LSTMLayer]],
            nn.ModuleList(
                nn.ModuleList(LSTMLayer(lstm.projection_dim, lstm) for _ in range(lstm.n_layers))
                for _direction in range(2)
            ),
        )
        markers = torch.from_numpy(sentence_markers(options.char_cnn.max_characters_per_token))
        self.register_buffer("markers", markers, persistent=False)
        # Optional TokenVectorCache (set by ElmoEmbedder for a frozen model); used only without gradients.
        self.token_cache: Optional[TokenVectorCache] = None
        # Run the two directions at the same time when torch has 2+ threads (see module docstring).
        self.concurrent_directions = True
        self.set_kernels(default_kernels())

    @property
    def n_output_layers(self) -> int:
        return self.options.n_output_layers

    def forward(self, char_ids: Tensor, lengths: Tensor, top_layer: Optional[int] = None) -> Tensor:
        """Compute ELMo layers ``0..top_layer`` (default: all); higher LSTM layers are not run.

        char_ids: ``[batch, max_len, max_chars]`` ids from :func:`batch_to_char_ids`.
        lengths: ``[batch]`` number of tokens per sentence (0 allowed).
        Returns ``[top_layer + 1, batch, max_len, 2 * projection_dim]``; positions past a
        sentence's length are zero.
        """
        top = self.check_top_layer(top_layer)
        batch, max_len, _ = char_ids.shape
        out_dim = self.options.output_dim
        if batch == 0 or max_len == 0:
            return char_ids.new_zeros((top + 1, batch, max_len, out_dim), dtype=torch.float32)
        packed = self._pack_with_markers(char_ids, lengths.to("cpu", torch.int64))
        batch_sizes = packed.batch_sizes.tolist()
        unique_words, inverse = torch.unique(packed.data, dim=0, return_inverse=True)
        vectors = self.token_vectors(unique_words)
        tokens = vectors[inverse]
        reverse = _reversal_permutation(packed.batch_sizes, lengths.to("cpu", torch.int64) + 2).to(tokens.device)
        both = _run_concurrently if self.concurrent_directions and torch.get_num_threads() > 1 else _run_in_turn
        forward_outs, backward_outs = both(
            lambda: self._run_stack(0, vectors, inverse, batch_sizes, top),
            lambda: self._run_stack(1, vectors, inverse[reverse], batch_sizes, top),
        )
        layers = [torch.cat([tokens, tokens], dim=-1)]
        layers += [torch.cat([f, b[reverse]], dim=-1) for f, b in zip(forward_outs, backward_outs)]
        stacked = torch.cat(layers, dim=-1)  # [rows, (top + 1) * out_dim]
        padded, _ = pad_packed_sequence(
            PackedSequence(stacked, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices),
            batch_first=True,
            total_length=max_len + 2,
        )
        positions = torch.arange(max_len, device=padded.device)
        inside = (positions[None, :] < lengths.to(padded.device)[:, None]).unsqueeze(-1)
        body = padded[:, 1 : max_len + 1] * inside
        return body.reshape(batch, max_len, top + 1, out_dim).permute(2, 0, 1, 3)

    def _run_stack(
        self, direction: int, vectors: Tensor, rows: Tensor, batch_sizes: List[int], top: int
    ) -> List[Tensor]:
        """Outputs of LSTM layers ``1..top`` of one direction (0: forward, 1: backward), packed: the
        first layer's packed row ``r`` reads the token vector ``vectors[rows[r]]``."""
        x, outputs = vectors, []
        for k in range(top):
            out = self.stacks[direction][k](x, batch_sizes, rows if k == 0 else None)
            if k > 0 and self.options.lstm.use_skip_connections:
                out = out + x
            outputs.append(out)
            x = out
        return outputs

    def token_vectors(self, words: Tensor) -> Tensor:
        """Char-CNN vectors ``[n_words, projection_dim]`` of ``[n_words, max_chars]`` character ids.

        Served from :attr:`token_cache` when one is set and gradients are disabled.
        """
        if self.token_cache is None or torch.is_grad_enabled():
            return self.char_cnn(words)
        return self.token_cache.vectors(words, self.char_cnn)

    def set_compute_dtype(self, dtype: torch.dtype) -> "BiLM":
        """Run the matrix products and convolutions (char-CNN and LSTMs) in ``dtype``:
        ``torch.float32`` (exact, default) or ``torch.bfloat16`` (opt-in, for CPUs with bf16 units
        and GPUs). Biases, the highway gating, the LSTM cell state, gates and clipping, and all
        outputs stay float32; the deviation from float32 is bounded in ``tests/test_bilm_bfloat16.py``.
        A token cache is emptied when the dtype changes. Without gradients (inference) the bf16
        copies of the weights are kept and reused while the weights do not change (half the
        float32 weights' memory in addition).
        """
        if dtype not in (torch.float32, torch.bfloat16):
            raise ValueError(f"compute dtype must be torch.float32 or torch.bfloat16, got {dtype}")
        if dtype != self.compute_dtype and self.token_cache is not None:
            self.token_cache.clear()
        for module in (self.char_cnn, *(layer for stack in self.stacks for layer in stack)):
            # mypy joins CharCNN and LSTMLayer into nn.Module, whose other attributes are Tensor | Module
            module.compute_dtype = dtype  # type: ignore[assignment]
        return self

    def set_kernels(self, kernels: str) -> "BiLM":
        """Run the float32 inference products (char-CNN highway and projection, LSTM input, recurrent
        and projection products) on the kernel set ``kernels`` (see :mod:`.kernels`): ``mkl-packed``,
        ``onednn-packed``, ``torch`` or ``openblas``; a new model uses
        :func:`~.kernels.default_kernels` (per CPU).

        ``mkl-packed``: the recurrent and projection weights are packed for the batch's sentence
        count and kept while the weights and that count do not change (a new count repacks them,
        which takes time); every step with at least half that many active rows runs as one packed
        product over all of them (zero rows padding the finished sentences), smaller steps as plain
        products. Its memory: packed copies larger than the two weights, in addition (repack time
        and sizes in docs/benchmarks.md, section "What pays"); weights whose packed copy would
        exceed :data:`~.kernels.MAX_PACKED_RATIO` times their size (small models such as the embedded
        one) are not packed. ``onednn-packed``: the same two weights in oneDNN's packed layout (about
        their size again), made once for the first batch's sentence count (at least
        :data:`~.kernels.ONEDNN_PACK_ROWS`) and kept for any count; every step is one packed product,
        whatever its row count; weights of fewer than :data:`~.kernels.MIN_ONEDNN_PACKED` elements
        are not packed. The other sets keep no copies (switching to them frees the packed ones).
        Every set computes the same float32 sums grouped differently (within ~1e-7 of each other on
        the full-size model); with gradients, in bfloat16 and off the CPU the products are torch's.
        Raises ElmoConfigError for an unknown set or one this machine cannot run.
        """
        check_kernels(kernels)
        self.char_cnn.kernels = kernels
        for stack in self.stacks:
            for layer in stack:
                layer.kernels = kernels
                if kernels not in PACKED_KERNELS:
                    drop_packed(layer.w_recurrent)
                    drop_packed(layer.w_projection)
        return self

    def weights_changed(self) -> None:
        """Forget what is kept per weight (packed and bfloat16 copies) and the token cache's vectors.

        Call it after changing weights where torch does not see it, e.g. through a numpy view
        (``layers.torch_shim.TorchShim`` does after each optimizer step); a change made by a torch
        in-place op moves the weight's version counter, which the kept copies check anyway.
        """
        for weight in self.parameters():
            drop_packed(weight)
            weight.__dict__.pop(_CAST_ATTR, None)
        if self.token_cache is not None:
            self.token_cache.clear()

    @property
    def kernels(self) -> str:
        """The kernel set of the float32 inference products (see :meth:`set_kernels`)."""
        return self.char_cnn.kernels

    @property
    def compute_dtype(self) -> torch.dtype:
        """The dtype of the matrix products and convolutions (see :meth:`set_compute_dtype`)."""
        return self.char_cnn.compute_dtype

    def check_top_layer(self, top_layer: Optional[int]) -> int:
        n_lstm = self.options.lstm.n_layers
        if top_layer is None:
            return n_lstm
        if isinstance(top_layer, bool) or not isinstance(top_layer, int) or not 0 <= top_layer <= n_lstm:
            raise ElmoInputError(
                f"top_layer={top_layer!r} is not available: this biLM has layers 0..{n_lstm} "
                f"(0 = token vectors, 1..{n_lstm} = LSTM layers)"
            )
        return top_layer

    def _pack_with_markers(self, char_ids: Tensor, lengths: Tensor) -> PackedSequence:
        batch, max_len, max_chars = char_ids.shape
        if lengths.shape != (batch,) or int(lengths.min()) < 0 or int(lengths.max()) > max_len:
            raise ValueError(f"lengths must be {batch} values in 0..{max_len}, got {lengths.tolist()}")
        ids = char_ids.new_zeros((batch, max_len + 2, max_chars))
        ids[:, 1 : max_len + 1] = char_ids
        ids[:, 0] = self.markers[0]
        ids[torch.arange(batch), lengths + 1] = self.markers[1]
        return pack_padded_sequence(ids, lengths + 2, batch_first=True, enforce_sorted=False)


T = TypeVar("T")


def _run_in_turn(first: Callable[[], T], second: Callable[[], T]) -> Tuple[T, T]:
    """``(first(), second())``, one after the other on the calling thread."""
    return first(), second()


_WORKER: Optional[ThreadPoolExecutor] = None
_WORKER_LOCK = threading.Lock()


def _run_concurrently(first: Callable[[], T], second: Callable[[], T]) -> Tuple[T, T]:
    """``(first(), second())`` at the same time: ``second`` on a worker thread, each on half of
    torch's threads (at least one; the count is restored afterwards). The worker runs under the
    caller's gradient and inference modes (both are thread-local in torch). torch's thread count is
    process-wide (MKL's is global), so other threads running torch ops meanwhile also see the half.
    """
    global _WORKER
    with _WORKER_LOCK:
        if _WORKER is None:
            _WORKER = ThreadPoolExecutor(1, thread_name_prefix="bilm-direction")
    threads = torch.get_num_threads()
    half = max(1, threads // 2)
    grad, inference = torch.is_grad_enabled(), torch.is_inference_mode_enabled()

    def on_worker() -> T:
        torch.set_num_threads(half)
        with torch.inference_mode(inference), torch.set_grad_enabled(grad):
            return second()

    torch.set_num_threads(half)
    try:
        pending = _WORKER.submit(on_worker)
        try:
            first_out = first()
        finally:
            wait([pending])
        return first_out, pending.result()
    finally:
        torch.set_num_threads(threads)


def _reversal_permutation(batch_sizes: Tensor, lengths: Tensor) -> Tensor:
    """Index that maps each packed row (sentence b, time t) to the row of (b, length_b - 1 - t).

    Rows are in the packed order of a batch sorted by decreasing length; ``lengths`` may be in any
    order (only their sorted values matter).
    """
    sorted_lengths = lengths.sort(descending=True).values
    offsets = torch.cumsum(batch_sizes, 0) - batch_sizes  # first packed row of each time step
    steps = torch.arange(int(sorted_lengths[0]))
    row_of = offsets[None, :] + torch.arange(len(sorted_lengths))[:, None]  # [batch, time]
    valid = steps[None, :] < sorted_lengths[:, None]
    mirrored = (sorted_lengths[:, None] - 1 - steps[None, :]).clamp(min=0)
    source = row_of[valid]
    target = row_of.gather(1, mirrored)[valid]
    reverse = torch.empty_like(source)
    reverse[source] = target
    return reverse
