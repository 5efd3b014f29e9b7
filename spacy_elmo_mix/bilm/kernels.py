"""Which library multiplies the biLM's float32 matrices at inference, chosen per CPU.

Nearly all of the exact path's time is matrix products: the char-CNN's highway and projection, each
LSTM's input product over all positions, and at every step its recurrent and projection products
(``[batch, 512] x [512, 16384]`` and ``[batch, 4096] x [4096, 512]`` at the published size). Which
library runs these shapes fastest depends on the CPU (``bench/allennlp_speed.py``,
docs/benchmarks.md), so the library is a setting with a per-CPU default. The kernel sets:

- ``onednn-packed``: torch's products, the recurrent and projection weights in oneDNN's packed
  float32 layout, one packed product per step whatever its row count (needs torch with oneDNN).
  oneDNN generates its kernels for the CPU's instruction set whoever made the CPU: the fastest
  measured on AMD EPYC with AVX-512, on the same CPU held to AVX2 and on Intel Xeon with AMX
  (docs/benchmarks.md, section "What pays"). Weights of fewer than
  :data:`MIN_ONEDNN_PACKED` elements keep the plain product (its fixed cost per call outweighs
  the gain on small models such as the embedded one);
- ``mkl-packed``: torch's products (MKL on x86), the recurrent and projection weights in MKL's
  packed layout (needs torch built with MKL);
- ``torch``: torch's plain products (``torch.mm``/``addmm``);
- ``openblas``: numpy's single-threaded OpenBLAS (numpy's wheels are built with it) for products
  made on one torch thread, as each direction's products are when the two directions run at once
  on two threads (``BiLM.concurrent_directions``); torch's plain products where torch has more
  threads (OpenBLAS's and torch's thread pools, both spinning, slow each other down:
  docs/benchmarks.md, section "AMD EPYC, AVX2 only, in detail"). Faster than MKL on AMD EPYC, where
  MKL takes slower code paths. No weight copies; it sets OpenBLAS's process-wide thread count to 1.

All compute the same float32 sums, grouped differently (within a few float32 roundings of each
other; the numerical tests run on each set). With gradients and off the CPU the products are torch's
plain ones. In bfloat16 (inference on the CPU, any kernel set) the recurrent and projection weights
are kept in oneDNN's packed layout (:func:`prepacked`): torch's plain bfloat16 product reorders the
whole weight into that layout on every call, which cost more than the product itself at the
published size. The default (:func:`default_kernels`) is ``SPACY_ELMO_MIX_KERNELS`` when set,
otherwise ``onednn-packed`` where torch has oneDNN, else ``openblas`` on AMD CPUs and
``mkl-packed`` elsewhere, each where available (else ``torch``). Measurements:
``bench/allennlp_speed.py``, docs/benchmarks.md.
"""

from __future__ import annotations

import ctypes
import functools
import os
from typing import Callable, NamedTuple, Optional

import numpy as np
import torch
from torch import Tensor

from ..errors import ElmoConfigError
from .precision import cpu_vendor

KERNELS = ("mkl-packed", "onednn-packed", "torch", "openblas")
# The kernel sets that keep the recurrent and projection weights packed (float32).
PACKED_KERNELS = ("mkl-packed", "onednn-packed")
ENV = "SPACY_ELMO_MIX_KERNELS"


def unavailable_reason(kernels: str) -> Optional[str]:
    """``None`` when the kernel set ``kernels`` can run here, else why not (one phrase)."""
    if kernels not in KERNELS:
        return f"unknown kernel set {kernels!r} (choose one of {', '.join(KERNELS)})"
    if kernels == "mkl-packed" and not mkl_packing_available():
        return "this torch has no MKL packed-weight ops (torch._C.has_mkl, torch.ops.mkl)"
    if kernels == "onednn-packed" and not onednn_packing_available(torch.float32):
        return "this torch has no oneDNN packed-weight ops (torch.backends.mkldnn, torch.ops.mkldnn)"
    if kernels == "openblas" and _openblas() is None:
        return "numpy here is not built with an OpenBLAS whose thread count can be set"
    return None


def check_kernels(kernels: str, source: str = "kernels") -> str:
    """``kernels`` when it names a kernel set that runs here; ElmoConfigError naming ``source`` otherwise."""
    reason = unavailable_reason(kernels)
    if reason:
        raise ElmoConfigError(f"{source}: {reason}")
    return kernels


def default_kernels() -> str:
    """The kernel set a new biLM uses: ``$SPACY_ELMO_MIX_KERNELS`` when set (checked), otherwise the
    first available of ``onednn-packed`` and then ``openblas`` on AMD CPUs, ``mkl-packed`` elsewhere;
    ``torch`` when neither is."""
    chosen = os.environ.get(ENV)
    if chosen:
        return check_kernels(chosen, f"${ENV}")
    fallback = "openblas" if cpu_vendor() == "AuthenticAMD" else "mkl-packed"
    return next((k for k in ("onednn-packed", fallback) if unavailable_reason(k) is None), "torch")


def mkl_packing_available() -> bool:
    """Whether this torch has MKL's packed-weight linear ops (``torch.ops.mkl``), used by :func:`prepacked`."""
    if not torch._C.has_mkl:
        return False
    try:
        return all(callable(getattr(torch.ops.mkl, op)) for op in ("_mkl_reorder_linear_weight", "_mkl_linear"))
    except (AttributeError, RuntimeError):
        return False


def onednn_packing_available(dtype: torch.dtype) -> bool:
    """Whether this torch has oneDNN's packed-weight linear ops (``torch.ops.mkldnn``) and this CPU
    runs them in ``dtype`` (float32 or bfloat16), used by :func:`prepacked`."""
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        ops = (torch.ops.mkldnn._reorder_linear_weight, torch.ops.mkldnn._linear_pointwise)
        supported = dtype == torch.float32 or bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
        return all(map(callable, ops)) and supported
    except (AttributeError, RuntimeError):
        return False


class PackedWeight(NamedTuple):
    """A weight in a library's packed layout for products with ``rows`` rows: oneDNN's (``onednn``;
    float32 or bfloat16) or MKL's (float32); ``weight`` is the float32 weight it was made from."""

    rows: int
    packed: Tensor
    weight: Tensor
    onednn: bool


# MKL's packed copy has a fixed overhead: for small weights (the embedded model's) it is many times
# the weight's size and costs far more memory than it can save time, while the published sizes pack
# into less than this ratio (docs/benchmarks.md, section "Packed weights: sizes and thresholds").
MAX_PACKED_RATIO = 4
# oneDNN's float32 packed product has a fixed cost per call beyond the plain one's: weights smaller
# than this (the embedded model's [2048, 128] recurrent and [128, 512] projection weights, which it
# made slower end to end) keep the plain product; the published sizes ([16384, 512], [512, 4096])
# gain at every row count (docs/benchmarks.md, section "Packed weights: sizes and thresholds").
MIN_ONEDNN_PACKED = 1 << 19
# oneDNN's packed layout serves products of any row count, so its pack is kept when a batch's
# sentence count changes (repacking costs time per LSTM); the row count it is made for matters: a
# pack for 1 row is slower at larger counts than one for 32, which is as fast as one for 128 at every
# count (docs/benchmarks.md, section "Packed weights: sizes and thresholds").
ONEDNN_PACK_ROWS = 32


def prepacked(
    weight: Tensor, rows: int, dtype: torch.dtype = torch.float32, kernels: str = "mkl-packed"
) -> Optional[PackedWeight]:
    """``weight`` in a packed layout for products in ``dtype`` with ``rows`` rows, kept on the weight
    while it, ``dtype`` and the library do not change (one packed copy per weight).

    float32 on ``kernels`` ``mkl-packed``: MKL's layout for exactly ``rows`` rows (needs MKL; a new
    ``rows`` repacks); None when it is larger than :data:`MAX_PACKED_RATIO` times the weight.
    float32 on ``onednn-packed``, and bfloat16 on any ``kernels``: oneDNN's layout of the weight in
    ``dtype`` (about that weight's size; needs oneDNN, for bfloat16 with bfloat16 support), made for
    ``rows`` but at least :data:`ONEDNN_PACK_ROWS` rows and kept for products of any row count; in
    float32 None for weights of fewer than :data:`MIN_ONEDNN_PACKED` elements. None also off the
    CPU and when gradients are needed.
    """
    if weight.device.type != "cpu" or (torch.is_grad_enabled() and weight.requires_grad):
        return None
    onednn = dtype != torch.float32 or kernels == "onednn-packed"
    key = (onednn, dtype, None if onednn else rows, weight._version, weight.data_ptr())
    kept = getattr(weight, "_packed_copy", None)
    if kept is None or kept[0] != key:
        kept = (key, _pack(weight.detach(), max(rows, ONEDNN_PACK_ROWS) if onednn else rows, dtype, onednn))
        weight._packed_copy = kept  # type: ignore[attr-defined]  # our own attribute on the tensor
    return kept[1]


def _pack(weight: Tensor, rows: int, dtype: torch.dtype, onednn: bool) -> Optional[PackedWeight]:
    if onednn:
        too_small = dtype == torch.float32 and weight.numel() < MIN_ONEDNN_PACKED
        if too_small or not onednn_packing_available(dtype):
            return None
        return PackedWeight(rows, torch.ops.mkldnn._reorder_linear_weight(weight.to(dtype), rows), weight, True)
    packed = torch.ops.mkl._mkl_reorder_linear_weight(weight, rows)
    return PackedWeight(rows, packed, weight, False) if packed.numel() <= MAX_PACKED_RATIO * weight.numel() else None


def drop_packed(weight: Tensor) -> None:
    """Free the packed copy :func:`prepacked` kept on ``weight``, if any."""
    weight.__dict__.pop("_packed_copy", None)


def step_product(a: Tensor, w: Tensor, bias: Optional[Tensor], pack: Optional[PackedWeight], kernels: str) -> Tensor:
    """``bias + a @ w`` (no bias when None) as float32, ``w`` being a weight transposed (possibly cast).

    With MKL's float32 ``pack`` of that weight, a step with at least half the rows it was packed for
    is padded with zero rows to that count (the packed product of all rows is faster than a plain one
    of the active rows alone; rows of a product do not mix, so the padding changes no result) and
    the active rows are returned; smaller steps take the plain product of ``kernels``. With oneDNN's
    ``pack`` every step, of any row count, is one packed product: in float32 with the bias added by
    oneDNN; in bfloat16 (the same sums as torch's plain one) its result made float32 before the
    bias is added, as in :func:`product`.
    """
    n = a.shape[0]
    if pack is not None and pack.onednn:
        if pack.packed.dtype == torch.float32:
            return torch.ops.mkldnn._linear_pointwise(a, pack.packed, bias, "none", [], "")
        return _as_float32(
            torch.ops.mkldnn._linear_pointwise(a.to(torch.bfloat16), pack.packed, None, "none", [], ""), bias
        )
    if pack is None or 2 * n < pack.rows:
        return product(a, w, bias, kernels)
    if n < pack.rows:
        a = torch.cat([a, a.new_zeros(pack.rows - n, a.shape[1])])
    return torch.ops.mkl._mkl_linear(a, pack.packed, pack.weight, bias, pack.rows)[:n]


def product(a: Tensor, w: Tensor, bias: Optional[Tensor], kernels: str) -> Tensor:
    """``bias + a @ w`` (no bias when None) as float32 on ``kernels``' library, ``w`` being a weight
    transposed (float32, or cast to bfloat16: then torch's product in bfloat16). ``openblas`` serves
    float32 products without gradients on the CPU made on one torch thread; everything else is torch's
    (exactly ``torch.mm``/``torch.addmm`` for float32)."""
    if kernels == "openblas" and _openblas_can(a, w):
        return _openblas_product(a, w, bias)
    if w.dtype != torch.float32:
        return _as_float32(torch.mm(a.to(w.dtype), w), bias)
    return torch.mm(a, w) if bias is None else torch.addmm(bias, a, w)


def _as_float32(out: Tensor, bias: Optional[Tensor]) -> Tensor:
    """A low-precision product ``out`` made float32, plus the float32 ``bias`` (no bias when None)."""
    out = out.float()
    return out if bias is None else out.add_(bias)


def _openblas_can(a: Tensor, w: Tensor) -> bool:
    return (
        w.dtype == torch.float32
        and a.dtype == torch.float32
        and a.device.type == "cpu"
        and torch.get_num_threads() == 1
        and not (torch.is_grad_enabled() and (a.requires_grad or w.requires_grad))
    )


def _openblas_product(a: Tensor, w: Tensor, bias: Optional[Tensor]) -> Tensor:
    openblas = _openblas()
    assert openblas is not None  # the kernel set "openblas" is only accepted where it is found
    openblas.use_one_thread()
    out = torch.from_numpy(np.matmul(a.detach().numpy(), w.detach().numpy()))
    return out if bias is None else out.add_(bias)


class _OpenBLAS:
    """numpy's OpenBLAS through its thread-count functions (the count is read before each product:
    numpy's users and other libraries may set it meanwhile)."""

    def __init__(self, set_threads: Callable[[int], None], get_threads: Callable[[], int]):
        self._set_threads, self._get_threads = set_threads, get_threads

    def use_one_thread(self) -> None:
        if self._get_threads() != 1:
            self._set_threads(1)

    @property
    def threads(self) -> int:
        return self._get_threads()


# OpenBLAS's thread-count functions' prefix and suffix, by build: numpy 2's scipy-openblas64 wheels,
# 64-bit-index and plain builds.
_NAMES = (("scipy_openblas_", "64_"), ("openblas_", "64_"), ("openblas_", ""))


@functools.lru_cache(maxsize=None)
def _openblas() -> Optional[_OpenBLAS]:
    """numpy's OpenBLAS, or None where numpy's BLAS is another library or its library or thread
    functions cannot be found (looked up once)."""
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    except (TypeError, KeyError, AttributeError):  # numpy < 1.26 has no mode="dicts"
        return None
    if "openblas" not in str(blas.get("name", "")).lower():
        return None
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line}
    except OSError:  # not Linux
        return None
    for path in sorted(paths):
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in _NAMES:
            setter = getattr(library, f"{prefix}set_num_threads{suffix}", None)
            getter = getattr(library, f"{prefix}get_num_threads{suffix}", None)
            if setter is not None and getter is not None:
                setter.argtypes, setter.restype = [ctypes.c_int], None
                getter.argtypes, getter.restype = [], ctypes.c_int
                return _OpenBLAS(setter, getter)
    return None
