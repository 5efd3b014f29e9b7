"""Weighting schemes: AllenNLP ScalarMix semantics, the paper's columns, and exact gradients."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import softmax

from spacy_elmo_mix.architectures import build_concat_v1, build_paper_scheme_v1, build_scalar_mix_v1
from spacy_elmo_mix.errors import ElmoConfigError
from spacy_elmo_mix.layers.scalar_mix import PAPER_SCHEMES, normalized_weights


def _layers(seed: int, n_tokens=(5, 3), n_layers: int = 3, width: int = 4):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(n_layers, n, width)).astype("float32") for n in n_tokens]


def _init(model, X):
    model.initialize(X=X)
    return model


def test_scalar_mix_matches_allennlp_reference(fixtures_dir):
    """The reference ``mix_i`` = 1.3 * sum_j softmax([0.5, -0.2, 0.1])_j layer_j (AllenNLP ScalarMix)."""
    ref = np.load(fixtures_dir / "reference" / "expected_fixture_model.npz")
    X = [ref[f"layers_{i}"] for i in range(len(ref["lengths"]))]
    w = softmax(np.array([0.5, -0.2, 0.1]))
    mix = _init(build_scalar_mix_v1(layers=[0, 1, 2], initial_weights=w.tolist(), gamma=1.3), X[:1])
    for i, y in enumerate(mix.predict(X)):
        np.testing.assert_allclose(y, ref[f"mix_{i}"], atol=1e-5)


@pytest.mark.parametrize(
    "name,expected_layers", [("layer1", [0]), ("layer2", [1]), ("layer3", [2]), ("average", [0, 1, 2])]
)
def test_fixed_paper_schemes(name, expected_layers):
    X = _layers(0)
    mix = _init(build_paper_scheme_v1(name), X)
    for x, y in zip(X, mix.predict(X)):
        np.testing.assert_allclose(y, x[expected_layers].mean(axis=0), rtol=1e-5, atol=1e-6)


def test_concat_and_weighted12():
    X = _layers(1)
    concat = _init(build_paper_scheme_v1("concat"), X)
    assert concat.get_dim("nO") == 12
    np.testing.assert_array_equal(concat.predict(X)[0][:, 4:8], X[0][1])
    weighted12 = _init(build_paper_scheme_v1("weighted12"), X)
    assert weighted12.attrs["layers"] == [0, 1] and weighted12.attrs["trainable"]
    assert set(PAPER_SCHEMES) == {"layer1", "layer2", "layer3", "concat", "average", "weighted", "weighted12"}


def _numeric_check(model, X, names):
    """Compare backprop's input gradient and parameter gradients with central differences."""
    rng = np.random.default_rng(3)
    Y, backprop = model.begin_update(X)
    dY = [rng.normal(size=y.shape).astype("float32") for y in Y]
    dX = backprop(dY)

    def loss(Xs):
        return float(sum((y * d).sum() for y, d in zip(model.predict(Xs), dY)))

    eps = 1e-2
    for doc in range(len(X)):
        for index in [(0, 0, 0), (1, 1, 2), (2, 2, 3)]:
            plus = [x.copy() for x in X]
            minus = [x.copy() for x in X]
            plus[doc][index] += eps
            minus[doc][index] -= eps
            assert dX[doc][index] == pytest.approx((loss(plus) - loss(minus)) / (2 * eps), rel=2e-2, abs=2e-3)
    for name in names:
        grad = model.get_grad(name).copy()
        param = model.get_param(name)
        for k in range(param.size):
            saved = param.copy()
            param.flat[k] += eps
            model.set_param(name, param)
            up = loss(X)
            param.flat[k] -= 2 * eps
            model.set_param(name, param)
            down = loss(X)
            model.set_param(name, saved)
            param = saved
            assert grad.flat[k] == pytest.approx((up - down) / (2 * eps), rel=2e-2, abs=2e-3)


@pytest.mark.parametrize("layer_norm", [False, True])
def test_scalar_mix_gradients(layer_norm):
    X = _layers(2)
    mix = _init(
        build_scalar_mix_v1(initial_weights=[0.2, 0.5, 0.3], layers=[0, 1, 2], gamma=0.7, layer_norm=layer_norm), X
    )
    _numeric_check(mix, X, ["s", "gamma"])


def test_concat_gradients():
    X = _layers(4)
    _numeric_check(_init(build_concat_v1([2, 0]), X), X, [])


def test_fixed_scheme_gets_no_gradient():
    X = _layers(5)
    mix = _init(build_paper_scheme_v1("average"), X)
    _, backprop = mix.begin_update(X)
    backprop([np.ones((x.shape[1], 4), dtype="float32") for x in X])
    assert not mix.has_grad("s") and not mix.has_grad("gamma")


def test_layer_norm_is_per_doc():
    X = _layers(6)
    mix = _init(build_scalar_mix_v1(layer_norm=True), X)
    together = mix.predict(X)
    alone = [mix.predict([x])[0] for x in X]
    for a, b in zip(together, alone):
        np.testing.assert_array_equal(a, b)
    assert np.isfinite(mix.predict([np.zeros((3, 0, 4), dtype="float32")])[0]).all()


def test_weight_dropout_keeps_a_layer_and_sums_to_one():
    X = _layers(7)
    mix = _init(build_scalar_mix_v1(weight_dropout=0.9), X)
    for _ in range(20):
        Y, _ = mix.begin_update(X)
        assert np.isfinite(Y[0]).all() and np.abs(Y[0]).sum() > 0
    np.testing.assert_allclose(normalized_weights(mix), [1 / 3] * 3, rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"layers": []}, "non-empty"),
        ({"layers": [0, 0]}, "distinct"),
        ({"layers": [-1]}, ">= 0"),
        ({"layers": [0, 1], "initial_weights": [1.0]}, "one value per layer"),
        ({"layers": [0], "initial_weights": [0.0]}, "positive"),
        ({"weight_dropout": 1.0}, "weight_dropout"),
    ],
)
def test_bad_scheme_settings(kwargs, match):
    with pytest.raises(ElmoConfigError, match=match):
        build_scalar_mix_v1(**kwargs)


def test_unknown_paper_scheme():
    with pytest.raises(ElmoConfigError, match="weighted12"):
        build_paper_scheme_v1("weighted3")


def test_layer_beyond_model_fails_at_initialize():
    with pytest.raises(ElmoConfigError, match=r"layer 2 .*offers layers 0\.\.1"):
        build_paper_scheme_v1("layer3").initialize(X=_layers(8, n_layers=2))
