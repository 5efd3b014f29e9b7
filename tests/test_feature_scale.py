"""ELMo vectors at a set scale (``ScaledNorm``, ``ElmoTok2Vec.v2``): values, exact gradients, settings."""

from __future__ import annotations

import numpy as np
import pytest
from thinc.api import noop

from spacy_elmo_mix.architectures import build_tok2vec_v2
from spacy_elmo_mix.errors import ElmoConfigError
from spacy_elmo_mix.layers.feature_scale import ScaledNorm


def _vectors(seed: int, shape=(7, 12), dtype="float64"):
    """Rows with an offset and scales like raw ELMo layers (mean about 1, spread about 3)."""
    rng = np.random.default_rng(seed)
    return (1.0 + 3.0 * rng.normal(size=shape)).astype(dtype)


def _scaled(scale=0.1, trainable=True):
    model = ScaledNorm(scale, trainable)
    model.initialize()
    return model


def test_every_row_has_mean_zero_and_the_set_root_mean_square():
    X = _vectors(0, dtype="float32")
    Y = _scaled(0.1).predict(X)
    np.testing.assert_allclose(Y.mean(axis=1), 0.0, atol=1e-7)
    # float32: the row's sums over 12 values carry a relative error of a few 1e-7.
    np.testing.assert_allclose(np.sqrt((Y**2).mean(axis=1)), 0.1, rtol=1e-5)


def test_gradients_match_central_differences():
    """In float64, where central differences with step 1e-5 are exact to about 1e-9 relative."""
    X, dY = _vectors(1), _vectors(2)
    model = _scaled(0.3)
    Y, backprop = model.begin_update(X)
    dX = backprop(dY)

    def loss(x):
        return float((model.predict(x) * dY).sum())

    eps = 1e-5
    numeric = np.zeros_like(X)
    for index in np.ndindex(*X.shape):
        plus, minus = X.copy(), X.copy()
        plus[index] += eps
        minus[index] -= eps
        numeric[index] = (loss(plus) - loss(minus)) / (2 * eps)
    np.testing.assert_allclose(dX, numeric, rtol=1e-6, atol=1e-8)
    # Y is linear in s: dLoss/ds = sum(dY * Y) / s.
    assert model.get_grad("s")[0] == pytest.approx(float((dY * Y).sum()) / 0.3, rel=1e-6)


def test_fixed_scale_gets_no_gradient():
    model = _scaled(0.1, trainable=False)
    _, backprop = model.begin_update(_vectors(3))
    backprop(_vectors(4))
    assert not model.has_grad("s")


def test_constant_rows_give_zeros_not_nan():
    Y = _scaled().predict(np.full((2, 5), 4.0, dtype="float32"))
    assert np.array_equal(Y, np.zeros((2, 5), dtype="float32"))


def _passthrough():
    """A stand-in for the listener (inputs are already arrays) and for the encoder."""
    return noop()


@pytest.mark.parametrize("bad", [0, -0.5, float("nan")])
def test_bad_scale_names_the_setting(bad):
    with pytest.raises(ElmoConfigError, match="elmo_scale"):
        build_tok2vec_v2(_passthrough(), 8, _passthrough(), elmo_scale=bad)


def test_a_scale_adds_the_norm_and_null_passes_elmo_raw():
    """With null scale ELMo reaches the projection as it is; with a scale, the projection sees scaled rows."""
    X = [_vectors(5, (4, 6), "float32"), _vectors(6, (3, 6), "float32")]
    raw = build_tok2vec_v2(_passthrough(), 8, _passthrough(), elmo_scale=None)
    scaled = build_tok2vec_v2(_passthrough(), 8, _passthrough(), elmo_scale=0.1)
    assert "scaled_norm" in [n.name for n in scaled.walk()] and "scaled_norm" not in [n.name for n in raw.walk()]
    scaled.initialize(X=X)
    norm = next(n for n in scaled.walk() if n.name == "scaled_norm")
    for x in X:
        np.testing.assert_allclose(np.sqrt((norm.predict(x) ** 2).mean(axis=1)), 0.1, rtol=1e-5)
    assert scaled.predict(X)[0].shape == (4, 8)
