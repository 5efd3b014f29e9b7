"""``BiLM.set_kernels``: every kernel set (MKL's or oneDNN's packed weights, torch's plain products,
numpy's OpenBLAS) gives the reference's results within the float32 bound, padded packed steps
included; the default follows the CPU and ``$SPACY_ELMO_MIX_KERNELS``; a set that cannot run is an
error."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from spacy_elmo_mix.bilm import ElmoEmbedder, batch_to_char_ids, kernels
from spacy_elmo_mix.bilm.kernels import (
    KERNELS,
    PACKED_KERNELS,
    mkl_packing_available,
    onednn_packing_available,
    prepacked,
    product,
    step_product,
    unavailable_reason,
)
from spacy_elmo_mix.errors import ElmoConfigError

needs_mkl = pytest.mark.skipif(
    not mkl_packing_available(), reason="this torch has no MKL packed-weight ops (prepacked weights need them)"
)
needs_onednn_bf16 = pytest.mark.skipif(
    not onednn_packing_available(torch.bfloat16), reason="this torch or CPU has no oneDNN bfloat16 packed-weight ops"
)
needs_onednn = pytest.mark.skipif(
    not onednn_packing_available(torch.float32), reason="this torch has no oneDNN packed-weight ops"
)
U = 2.0**-24
SHIPPED_MIN_ONEDNN_PACKED = kernels.MIN_ONEDNN_PACKED  # before pack_small_weights lowers it


def product_atol(a, weight, bias) -> float:
    """Two groupings of the same float32 sums of K = a.shape[1] (+1 bias) products each differ by at
    most 2 sqrt(K + 1) u max(|a| |W|^T + |b|) (probabilistic bound, as in test_bilm_reference.py)."""
    magnitude = a.abs() @ weight.t().abs() + (0 if bias is None else bias.abs())
    return 2 * (a.shape[1] + 1) ** 0.5 * U * float(magnitude.max())


@pytest.fixture(autouse=True)
def pack_small_weights(monkeypatch):
    """The fixture model's weights are far below the size MKL's and oneDNN's packing pay for (see
    ``MAX_PACKED_RATIO``, ``MIN_ONEDNN_PACKED``): pack them anyway, so these tests run the packed path."""
    monkeypatch.setattr(kernels, "MAX_PACKED_RATIO", 10_000)
    monkeypatch.setattr(kernels, "MIN_ONEDNN_PACKED", 0)


@pytest.fixture
def embedder(tiny_model_files):
    return ElmoEmbedder(*tiny_model_files)


@pytest.fixture(scope="module")
def sentences(fixtures_dir):
    lines = (fixtures_dir / "reference" / "sentences_fixture_model.txt").read_text(encoding="utf-8").splitlines()
    return [line.split() for line in lines]


def packs(model):
    """The packed copy kept on each LSTM's recurrent and projection weight (None: not packed)."""
    return [
        getattr(w, "_packed_copy", (None, None))[1]
        for stack in model.stacks
        for layer in stack
        for w in (layer.w_recurrent, layer.w_projection)
    ]


def onednn_rows(rows):
    """The row count oneDNN's packs are made for, for batches of ``rows`` sentences (MKL's: ``rows``)."""
    return max(rows, kernels.ONEDNN_PACK_ROWS)


def packed_sizes(model):
    """The batch size each LSTM weight is packed for (None: not packed)."""
    return {None if pack is None else pack.rows for pack in packs(model)}


@pytest.mark.parametrize("name", PACKED_KERNELS)
def test_prepacked_equals_plain_mkl_repacks_for_a_new_batch_size_onednn_keeps_its_pack(
    embedder, sentences, fixtures_dir, name
):
    from test_bilm_reference import fixture_model_atol

    if unavailable_reason(name):
        pytest.skip(unavailable_reason(name))
    onednn = name == "onednn-packed"
    embedder.model.set_kernels(name)
    packed = list(embedder.embed_sentences(sentences[:16], batch_size=8, sort_batches=1))
    first = packs(embedder.model)
    assert packed_sizes(embedder.model) == {onednn_rows(8) if onednn else 8}
    assert {pack.onednn for pack in first} == {onednn}
    packed += list(embedder.embed_sentences(sentences[16:], batch_size=14, sort_batches=1))
    if onednn:
        assert all(kept is pack for kept, pack in zip(packs(embedder.model), first))
    else:
        assert packed_sizes(embedder.model) == {len(sentences) - 16}
    embedder.model.set_kernels("torch")
    assert packed_sizes(embedder.model) == {None}
    plain = list(embedder.embed_sentences(sentences, batch_size=8))
    assert packed_sizes(embedder.model) == {None}
    atol = fixture_model_atol(fixtures_dir, sentences, plain)  # each path's error from exact: within it
    for a, b in zip(packed, plain):
        np.testing.assert_allclose(a, b, rtol=0, atol=atol)


@needs_mkl
@pytest.mark.parametrize("rows", [1, 5, 7, 8])
def test_a_step_padded_to_the_packed_rows_equals_the_plain_product(rows):
    """Steps with at least half the packed rows are padded with zero rows; smaller ones are plain."""
    torch.manual_seed(0)
    weight, bias, a = torch.randn(64, 24), torch.randn(64), torch.randn(rows, 24)
    pack = prepacked(weight, 8)
    assert pack is not None and pack.rows == 8
    for b in (bias, None):
        plain = a @ weight.t() + (0 if b is None else b)
        np.testing.assert_allclose(
            step_product(a, weight.t(), b, pack, "mkl-packed"), plain, rtol=0, atol=product_atol(a, weight, b)
        )


@needs_onednn
@pytest.mark.parametrize("rows", [1, 5, 8, 11])
def test_a_float32_step_on_onednn_packed_weights_equals_the_plain_product(rows):
    """oneDNN's float32 pack serves steps of any row count, fewer or more than it was packed for,
    with the bias added by oneDNN: the same float32 sums as the plain product, grouped otherwise."""
    torch.manual_seed(0)
    weight, bias, a = torch.randn(64, 24), torch.randn(64), torch.randn(rows, 24)
    pack = prepacked(weight, 8, torch.float32, "onednn-packed")
    assert pack is not None and pack.rows == onednn_rows(8) and pack.onednn and pack.packed.dtype == torch.float32
    for b in (bias, None):
        plain = a @ weight.t() + (0 if b is None else b)
        packed = step_product(a, weight.t(), b, pack, "onednn-packed")
        assert packed.dtype == torch.float32 and packed.shape == (rows, 64)
        np.testing.assert_allclose(packed, plain, rtol=0, atol=product_atol(a, weight, b))


@needs_onednn_bf16
@pytest.mark.parametrize("rows", [1, 5, 8])
def test_a_bfloat16_step_on_onednn_packed_weights_equals_the_plain_bfloat16_product(rows):
    """Both are the same bfloat16 products summed in float32 (grouped possibly otherwise: the float32
    bound of ``product_atol``), each rounded once to bfloat16 (at most 2^-8 of the value apart more),
    then the same float32 bias; the pack serves steps of any size."""
    torch.manual_seed(0)
    weight, bias = torch.randn(64, 24), torch.randn(64)
    a = torch.randn(rows, 24).bfloat16().float()
    low = weight.bfloat16()
    pack = prepacked(weight, 8, torch.bfloat16)
    assert pack is not None and pack.rows == onednn_rows(8) and pack.packed.dtype == torch.bfloat16
    for b in (bias, None):
        plain = product(a, low.t(), b, "torch")
        packed = step_product(a, low.t(), b, pack, "torch")
        assert packed.dtype == torch.float32 and packed.shape == (rows, 64)
        rounding = 2.0**-8 * float((plain - (0 if b is None else b)).abs().max())
        atol = product_atol(a, low.float(), None) + rounding
        np.testing.assert_allclose(packed, plain, rtol=0, atol=atol)


@needs_onednn_bf16
def test_bfloat16_inference_packs_the_step_weights_once_and_not_with_gradients(tiny_model_files, sentences):
    from spacy_elmo_mix.bilm.loading import load_bilm

    embedder = ElmoEmbedder(*tiny_model_files, dtype="bfloat16")
    before = embedder.embed_batch(sentences[:6])
    weight = embedder.model.stacks[1][0].w_recurrent
    pack = weight._packed_copy[1]
    assert pack.packed.dtype == torch.bfloat16 and packed_sizes(embedder.model) == {onednn_rows(6)}
    for again, first in zip(embedder.embed_batch(sentences[:6]), before):
        np.testing.assert_array_equal(again, first)
    assert weight._packed_copy[1] is pack  # kept, not packed again
    model = load_bilm(*tiny_model_files).set_compute_dtype(torch.bfloat16)
    ids, lengths = torch.from_numpy(batch_to_char_ids(sentences[:4])), torch.tensor([len(s) for s in sentences[:4]])
    model(ids, lengths).sum().backward()
    assert packed_sizes(model) == {None}
    assert model.stacks[0][0].w_recurrent.grad.abs().sum() > 0


@pytest.mark.parametrize("name", KERNELS)
def test_every_kernel_set_matches_the_allennlp_reference(embedder, sentences, fixtures_dir, name):
    from test_bilm_reference import fixture_model_atol

    if unavailable_reason(name):
        pytest.skip(unavailable_reason(name))
    embedder.model.set_kernels(name)
    expected = np.load(fixtures_dir / "reference" / "expected_fixture_model.npz")
    references = [expected[f"layers_{i}"] for i in range(len(sentences))]
    atol = fixture_model_atol(fixtures_dir, sentences, references)
    for layers, reference in zip(embedder.embed_batch(sentences), references):
        np.testing.assert_allclose(layers, reference, rtol=0, atol=atol)
    rows = {"mkl-packed": len(sentences), "onednn-packed": onednn_rows(len(sentences))}.get(name)
    assert packed_sizes(embedder.model) == {rows}


@needs_mkl
def test_not_packed_with_gradients(tiny_model_files, sentences):
    from spacy_elmo_mix.bilm.loading import load_bilm

    model = load_bilm(*tiny_model_files).set_kernels("mkl-packed")
    ids, lengths = torch.from_numpy(batch_to_char_ids(sentences[:4])), torch.tensor([len(s) for s in sentences[:4]])
    model(ids, lengths).sum().backward()
    assert packed_sizes(model) == {None}
    assert model.stacks[0][0].w_recurrent.grad.abs().sum() > 0


@needs_mkl
def test_weights_whose_packed_copy_is_much_larger_are_not_packed(tiny_model_files, sentences, monkeypatch):
    """MKL's packed copy of a small weight is many times its size: such weights keep the plain product."""
    monkeypatch.setattr(kernels, "MAX_PACKED_RATIO", 4)
    embedder = ElmoEmbedder(*tiny_model_files)
    embedder.model.set_kernels("mkl-packed")
    weight = embedder.model.stacks[0][0].w_recurrent
    assert torch.ops.mkl._mkl_reorder_linear_weight(weight.detach(), 4).numel() > 4 * weight.numel()
    default = embedder.embed_batch(sentences[:4])
    assert packed_sizes(embedder.model) == {None}
    embedder.model.set_kernels("torch")
    for got, want in zip(default, embedder.embed_batch(sentences[:4])):
        np.testing.assert_array_equal(got, want)


@needs_onednn
def test_weights_below_the_onednn_size_keep_the_plain_product(tiny_model_files, sentences, monkeypatch):
    """oneDNN's packed float32 product costs more than it saves on small weights
    (``MIN_ONEDNN_PACKED``): those keep the plain product, bit for bit the ``torch`` set's."""
    monkeypatch.setattr(kernels, "MIN_ONEDNN_PACKED", SHIPPED_MIN_ONEDNN_PACKED)
    embedder = ElmoEmbedder(*tiny_model_files)
    embedder.model.set_kernels("onednn-packed")
    default = embedder.embed_batch(sentences[:4])
    assert packed_sizes(embedder.model) == {None}
    embedder.model.set_kernels("torch")
    for got, want in zip(default, embedder.embed_batch(sentences[:4])):
        np.testing.assert_array_equal(got, want)
    assert SHIPPED_MIN_ONEDNN_PACKED > embedder.model.stacks[0][0].w_recurrent.numel()
    at_the_size = torch.randn(SHIPPED_MIN_ONEDNN_PACKED // 64, 64)
    assert prepacked(at_the_size, 4, torch.float32, "onednn-packed") is not None


@pytest.mark.skipif(bool(unavailable_reason("openblas")), reason=str(unavailable_reason("openblas")))
def test_openblas_runs_single_threaded_and_leaves_gradients_to_torch(
    tiny_model_files, sentences, monkeypatch, fixtures_dir
):
    from test_bilm_reference import _options, float32_atol

    from spacy_elmo_mix.bilm.loading import load_bilm

    model = load_bilm(*tiny_model_files).set_kernels("openblas")
    ids, lengths = torch.from_numpy(batch_to_char_ids(sentences[:4])), torch.tensor([len(s) for s in sentences[:4]])
    calls = []
    real = kernels._openblas_product
    monkeypatch.setattr(kernels, "_openblas_product", lambda *args: calls.append(1) or real(*args))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with torch.no_grad():
            model.concurrent_directions = False
            two_threads = model(ids, lengths)  # more than one torch thread: torch's products
            assert not calls
        torch.set_num_threads(1)
        with torch.no_grad():
            one_thread = model(ids, lengths)
        assert calls and kernels._openblas().threads == 1
    finally:
        torch.set_num_threads(threads)
    n_calls = len(calls)
    with_grad = model(ids, lengths)  # gradients: torch's products, which autograd can differentiate
    with_grad.sum().backward()
    assert len(calls) == n_calls and model.stacks[0][0].w_recurrent.grad.abs().sum() > 0
    atol = float32_atol(_options(fixtures_dir), int(lengths.max()), one_thread.numpy())
    for other in (two_threads, with_grad.detach()):
        np.testing.assert_allclose(one_thread, other, rtol=0, atol=atol)


def test_default_kernels_follow_the_cpu_and_the_environment(monkeypatch, tiny_model_files):
    from spacy_elmo_mix.bilm.loading import load_bilm

    monkeypatch.delenv(kernels.ENV, raising=False)
    monkeypatch.setattr(kernels, "unavailable_reason", lambda name: None)
    for vendor, fallback in (("AuthenticAMD", "openblas"), ("GenuineIntel", "mkl-packed")):
        monkeypatch.setattr(kernels, "cpu_vendor", lambda vendor=vendor: vendor)
        assert kernels.default_kernels() == "onednn-packed"
        monkeypatch.setattr(kernels, "unavailable_reason", lambda name: "absent" if name == "onednn-packed" else None)
        assert kernels.default_kernels() == fallback
        monkeypatch.setattr(kernels, "unavailable_reason", lambda name: None)
    monkeypatch.setattr(kernels, "unavailable_reason", lambda name: "absent")
    assert kernels.default_kernels() == "torch"
    monkeypatch.undo()
    monkeypatch.setenv(kernels.ENV, "torch")
    assert load_bilm(*tiny_model_files).kernels == "torch"
    monkeypatch.setenv(kernels.ENV, "blis")
    with pytest.raises(ElmoConfigError, match=r"\$SPACY_ELMO_MIX_KERNELS: unknown kernel set 'blis'"):
        load_bilm(*tiny_model_files)


def test_an_unknown_kernel_set_is_an_error(embedder):
    with pytest.raises(ElmoConfigError, match="unknown kernel set 'fast'"):
        embedder.model.set_kernels("fast")
