"""The opt-in bfloat16 mode: convolutions and matrix products in bfloat16 (char-CNN and LSTMs);
biases, gating, the LSTM cell state and the outputs in float32.

Measured deviation from the exact float32 path (max abs over all layers; share of the largest
output): trained tiny bilm-tf fixture 0.015 on these sentences, 0.019 on 64 held-out sentences
(0.2-0.3%); embedded default model 0.065 (0.6%) and 0.068 (0.25%) on an Intel Xeon with AMX; with
the gates' tanh from the sigmoid on an AMD EPYC (avx512_bf16): 0.015 and 0.023 (0.2-0.3%), 0.040
(0.4%) and 0.091 (0.5%; the first 64 held-out sentences). The bound below (1%) leaves room for other
CPUs' bf16 kernels. Trained models only: the random-weight fixture (``tiny_random``)
amplifies rounding in its top LSTM layer (up to 30% on long held-out sentences, also with a float32
char-CNN), which says nothing about bfloat16 on real models.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from spacy_elmo_mix import ElmoEmbedder

SENTENCES = [
    "The U.S. Centers for Disease Control initially advised school systems to close .".split(),
    "Elk calling -- a skill that hunters perfected long ago -- is now its own sport .".split(),
    "Short one .".split(),
]


@pytest.mark.parametrize("model", ["tf_fixture", "embedded"])
def test_bfloat16_stays_close_to_float32(tiny_model_files, model):
    from spacy_elmo_mix.default_model import default_model_files

    files = tiny_model_files if model == "tf_fixture" else default_model_files()
    exact = ElmoEmbedder(*files).embed_batch(SENTENCES)
    low = ElmoEmbedder(*files, dtype="bfloat16").embed_batch(SENTENCES)
    for a, b in zip(exact, low):
        assert b.dtype == np.float32
        deviation = np.abs(a - b).max()
        assert 0 < deviation <= 0.01 * np.abs(a).max() + 1e-3


def test_tanh_of_the_bfloat16_gates_is_within_its_bound():
    """bfloat16 runs take the gates' tanh as ``2 sigmoid(2x) - 1`` (torch's float32 tanh is not
    vectorized on every CPU): a float32 sigmoid within 2 units of 2^-24 of its value, doubled
    (exact) and less 1 (exact above 0.25, else within 2^-25), is within 2^-22 of tanh; the products'
    bfloat16 rounding (2^-9 relative) dwarfs it."""
    from spacy_elmo_mix.bilm.modules import _tanh_by_sigmoid

    x = torch.cat([torch.linspace(-20, 20, 400_001), torch.randn(100_000) * 1e-3, torch.randn(100_000) * 3])
    error = (_tanh_by_sigmoid(x).double() - torch.tanh(x.double())).abs().max()
    assert error <= 2.0**-22


def test_bad_dtype(tiny_model_files):
    with pytest.raises(ValueError, match="bfloat16"):
        ElmoEmbedder(*tiny_model_files, dtype="float16")
    with pytest.raises(ValueError, match="torch.float32 or torch.bfloat16"):
        ElmoEmbedder(*tiny_model_files).model.set_compute_dtype(torch.float64)


def test_component_compute_dtype(tiny_model_files, tmp_path):
    """``compute_dtype = "bfloat16"`` in the elmo component: bf16 layers (close to, not equal to,
    float32), kept after a disk round trip, and cached apart from the float32 layers."""
    import spacy

    from elmo_testing import elmo_only_nlp

    cache = tmp_path / "cache"
    exact_nlp = elmo_only_nlp(tiny_model_files, cache_dir=str(cache))
    low_nlp = elmo_only_nlp(tiny_model_files, cache_dir=str(cache), compute_dtype="bfloat16")
    text = " ".join(SENTENCES[0])
    exact = exact_nlp(text)._.elmo_layers
    low = low_nlp(text)._.elmo_layers  # same cache folder: must not be answered by the float32 entry
    deviation = np.abs(exact - low).max()
    assert 0 < deviation <= 0.01 * np.abs(exact).max() + 1e-3
    assert len([p for p in cache.iterdir() if p.is_dir()]) == 2  # one fingerprint per precision
    low_nlp.to_disk(tmp_path / "pipeline")
    reloaded = spacy.load(
        tmp_path / "pipeline", config={"components": {"elmo": {"model": {"cache_memory_mb": 0, "cache_dir": None}}}}
    )
    np.testing.assert_array_equal(reloaded(text)._.elmo_layers, low)


def test_component_bad_compute_dtype(tiny_model_files):
    from elmo_testing import elmo_only_nlp

    with pytest.raises(
        ValueError, match="compute_dtype must be 'float32' \\(exact\\), 'bfloat16' or 'auto', got 'float16'"
    ):
        elmo_only_nlp(tiny_model_files, compute_dtype="float16")


def test_fingerprint_tracks_compute_dtype(tiny_model_files):
    """float32 fingerprints are what they were before the precision setting existed."""
    from spacy_elmo_mix.cache.keys import model_fingerprint

    model = ElmoEmbedder(*tiny_model_files).model
    exact = model_fingerprint(model)
    model.set_compute_dtype(torch.bfloat16)
    low = model_fingerprint(model)
    model.set_compute_dtype(torch.float32)
    assert low != exact and model_fingerprint(model) == exact
    assert model_fingerprint(model, "x") != exact


def test_kept_bfloat16_weights_follow_weight_changes(tiny_model_files):
    """Inference reuses the bf16 casts of the weights; a changed weight is cast again."""
    embedder = ElmoEmbedder(*tiny_model_files, dtype="bfloat16")
    before = embedder.embed_sentence(SENTENCES[0])
    np.testing.assert_array_equal(embedder.embed_sentence(SENTENCES[0]), before)  # casts reused
    with torch.no_grad():
        embedder.model.stacks[0][1].w_recurrent.mul_(1.5)
        embedder.model.char_cnn.convolutions[0].weight.mul_(1.5)
    after = embedder.embed_sentence(SENTENCES[0])
    fresh = ElmoEmbedder(*tiny_model_files, dtype="bfloat16")
    fresh.model.load_state_dict(embedder.model.state_dict())
    np.testing.assert_array_equal(after, fresh.embed_sentence(SENTENCES[0]))
    assert not np.array_equal(after, before)


FAKE_CPUINFO = "processor\t: 0\nflags\t\t: fpu sse2 avx2 {extra}\n"


@pytest.mark.parametrize(
    "extra, expected",
    [
        ("avx512f avx512_bf16", torch.bfloat16),
        ("amx_bf16 amx_tile", torch.bfloat16),
        ("avx512f avx512_vnni", torch.float32),
        ("", torch.float32),
    ],
)
def test_auto_follows_cpu_flags(tmp_path, extra, expected):
    """``auto`` is bfloat16 exactly where the (faked) CPU flags promise native bf16 units."""
    from spacy_elmo_mix.bilm.precision import cpu_flags, resolve_compute_dtype

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(FAKE_CPUINFO.format(extra=extra))
    assert resolve_compute_dtype("auto", "cpu", cpu_flags(cpuinfo)) == expected
    assert resolve_compute_dtype("float32", "cpu", cpu_flags(cpuinfo)) == torch.float32


def test_aarch64_bf16_feature_counts(tmp_path):
    from spacy_elmo_mix.bilm.precision import cpu_flags, resolve_compute_dtype

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n")
    assert resolve_compute_dtype("auto", "cpu", cpu_flags(cpuinfo)) == torch.bfloat16


def test_explicit_bfloat16_without_native_support_warns_once(monkeypatch):
    from spacy_elmo_mix.bilm import precision

    monkeypatch.setattr(precision, "_warned", set())
    with pytest.warns(UserWarning, match="no native bfloat16 units"):
        assert precision.resolve_compute_dtype("bfloat16", "cpu", frozenset({"avx2"})) == torch.bfloat16
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert precision.resolve_compute_dtype("bfloat16", "cpu", frozenset({"avx2"})) == torch.bfloat16
        assert precision.resolve_compute_dtype("bfloat16", "cpu", frozenset({"avx512_bf16"})) == torch.bfloat16


def test_auto_on_this_machine(tiny_model_files):
    """Here (and on any CPU without avx512_bf16/amx_bf16/bf16) ``auto`` computes in float32: the same
    vectors as the default; where the CPU has them it is bfloat16."""
    from spacy_elmo_mix.bilm.precision import cpu_flags

    native = bool(cpu_flags() & {"avx512_bf16", "amx_bf16", "bf16"})
    auto = ElmoEmbedder(*tiny_model_files, dtype="auto")
    assert auto.model.compute_dtype == (torch.bfloat16 if native else torch.float32)
    if not native:
        exact = ElmoEmbedder(*tiny_model_files)
        np.testing.assert_array_equal(auto.embed_sentence(SENTENCES[0]), exact.embed_sentence(SENTENCES[0]))


def test_component_auto_compute_dtype(tiny_model_files):
    from elmo_testing import elmo_only_nlp
    from spacy_elmo_mix.bilm.precision import resolve_compute_dtype
    from spacy_elmo_mix.layers.bilm_model import get_bilm

    nlp = elmo_only_nlp(tiny_model_files, compute_dtype="auto", cache_memory_mb=0)
    assert get_bilm(nlp.get_pipe("elmo").model).compute_dtype == resolve_compute_dtype("auto")
