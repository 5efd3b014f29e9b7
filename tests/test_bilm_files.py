"""Reading and writing bilm-tf ``options.json`` + ``weights.hdf5``: round trips, 1-layer files, bad files."""

from __future__ import annotations

import json
import re

import h5py
import numpy as np
import pytest
import torch

from spacy_elmo_mix.bilm import ElmoEmbedder, load_bilm, save_bilm
from spacy_elmo_mix.errors import ElmoFileError

SENTENCES = [s.split() for s in ("The cat sat on the mat .", "Hello world", "A third , longer sentence about ELMo .")]
CELL1 = "/MultiRNNCell/Cell1/"


def datasets(path):
    """``{name: array}`` of every dataset in an hdf5 file."""
    found = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: found.__setitem__(name, obj[...]) if isinstance(obj, h5py.Dataset) else None)
    return found


def write_model(directory, options: dict, arrays: dict):
    """Write ``options.json`` and ``weights.hdf5`` into ``directory``; returns their paths."""
    directory.mkdir(exist_ok=True)
    (directory / "options.json").write_text(json.dumps(options), encoding="utf-8")
    with h5py.File(directory / "weights.hdf5", "w") as f:
        for name, array in arrays.items():
            f.create_dataset(name, data=array)
    return directory / "options.json", directory / "weights.hdf5"


@pytest.fixture(scope="module")
def fixture_options(tiny_model_files):
    return json.loads(tiny_model_files[0].read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def fixture_arrays(tiny_model_files):
    return datasets(tiny_model_files[1])


def test_save_load_round_trip_is_bit_identical(tiny_model_files, fixture_arrays, tmp_path):
    model = load_bilm(*tiny_model_files)
    directory = save_bilm(model, tmp_path / "saved")
    reloaded = load_bilm(directory / "options.json", directory / "weights.hdf5")
    state, restate = model.state_dict(), reloaded.state_dict()
    assert state.keys() == restate.keys()
    for name in state:
        assert torch.equal(state[name], restate[name]), name
    written = datasets(directory / "weights.hdf5")
    assert written.keys() == fixture_arrays.keys()
    for name, array in fixture_arrays.items():
        assert written[name].dtype == array.dtype and np.array_equal(written[name], array), name
    assert reloaded.options == model.options


@pytest.mark.parametrize(
    "rename",
    [lambda name: name, lambda name: name.replace("/MultiRNNCell/Cell0/", "/")],
    ids=["MultiRNNCell", "bilm-tf-single-cell"],
)
def test_one_layer_file_equals_lower_layers_of_two_layer_model(
    tiny_embedder, fixture_options, fixture_arrays, tmp_path, rename
):
    options = {**fixture_options, "lstm": {**fixture_options["lstm"], "n_layers": 1}}
    arrays = {rename(name): a for name, a in fixture_arrays.items() if CELL1 not in name}
    one_layer = ElmoEmbedder(*write_model(tmp_path / "one", options, arrays))
    assert one_layer.n_layers == 2
    for ours, full in zip(one_layer.embed_batch(SENTENCES), tiny_embedder.embed_batch(SENTENCES)):
        np.testing.assert_array_equal(ours, full[:2])


def without(arrays, name):
    return {k: v for k, v in arrays.items() if k != name}


def with_shape(arrays, name, shape):
    return {**arrays, name: np.zeros(shape, dtype=np.float32)}


def nested_update(options, section, key, value):
    return {**options, section: {**options[section], key: value}}


@pytest.mark.parametrize(
    "edit_arrays, message",
    [
        (lambda a: without(a, "CNN_proj/b_proj"), "no dataset 'CNN_proj/b_proj'"),
        (
            lambda a: without(a, "RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0"),
            "no dataset 'RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0'",
        ),
        (
            lambda a: with_shape(a, "CNN_high_1/W_carry", (124, 123)),
            "'CNN_high_1/W_carry' has shape (124, 123), expected (124, 124)",
        ),
        (lambda a: with_shape(a, "char_embed", (262, 4)), "'char_embed' has shape (262, 4), expected (261, 4)"),
        (lambda a: {**a, "CNN/b_cnn_0": np.full(4, np.nan, dtype=np.float32)}, "'CNN/b_cnn_0' contains NaN"),
    ],
    ids=["missing-cnn", "missing-lstm", "wrong-shape", "wrong-rows", "nan"],
)
def test_bad_weights_name_the_dataset(fixture_options, fixture_arrays, tmp_path, edit_arrays, message):
    options, weights = write_model(tmp_path / "bad", fixture_options, edit_arrays(fixture_arrays))
    with pytest.raises(ElmoFileError, match=re.escape(message)) as error:
        load_bilm(options, weights)
    assert str(weights) in str(error.value)


DAMAGED = [
    ("char_embed", (7, 2), 1e25, r"'char_embed' holds 1e\+25 at index \(7, 2\), beyond the \|w\| <= 10000"),
    ("CNN/W_cnn_3", (0, 1, 2, 3), -3e30, r"'CNN/W_cnn_3' holds -3e\+30 at index \(0, 1, 2, 3\)"),
    (
        "RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_0",
        (5, 9),
        np.nan,
        r"'RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_0' contains NaN",
    ),
    ("CNN_high_1/b_carry", (3,), -np.inf, r"'CNN_high_1/b_carry' contains NaN or infinite"),
]


@pytest.mark.parametrize(
    "name, index, value, message", DAMAGED, ids=["huge-char-embed", "huge-cnn", "nan-lstm", "inf-highway"]
)
def test_damaged_value_in_a_copied_file_names_the_dataset(tiny_model_files, tmp_path, name, index, value, message):
    """One value of a copy of a real weight file overwritten in place (as damaged bytes would): an
    error naming the file and dataset, where the intact copy loaded."""
    options, original = tiny_model_files
    weights = tmp_path / "weights.hdf5"
    weights.write_bytes(original.read_bytes())
    load_bilm(options, weights)
    with h5py.File(weights, "r+") as f:
        f[name][index] = value
    with pytest.raises(ElmoFileError, match=message) as error:
        load_bilm(options, weights)
    assert str(weights) in str(error.value) and "\n" not in str(error.value)


def test_largest_plausible_weight_still_loads(tiny_model_files, tmp_path):
    """The bound is on |w|: a value at it loads (no trained biLM comes near it, see MAX_ABS_WEIGHT)."""
    from spacy_elmo_mix.bilm.weights import MAX_ABS_WEIGHT

    weights = tmp_path / "weights.hdf5"
    weights.write_bytes(tiny_model_files[1].read_bytes())
    with h5py.File(weights, "r+") as f:
        f["CNN_proj/b_proj"][0] = -MAX_ABS_WEIGHT
    model = load_bilm(tiny_model_files[0], weights)
    assert model.char_cnn.projection.bias[0].item() == -MAX_ABS_WEIGHT


@pytest.mark.parametrize(
    "section, key, value, message",
    [
        ("lstm", "dim", 32, "'RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0' has shape (32, 256), expected (32, 128)"),
        ("lstm", "projection_dim", 32, "'CNN_proj/W_proj' has shape (124, 16), expected (124, 32)"),
        ("char_cnn", "n_highway", 3, "no dataset 'CNN_high_2/W_transform'"),
    ],
)
def test_options_that_disagree_with_weights(tiny_model_files, fixture_options, tmp_path, section, key, value, message):
    options = tmp_path / "options.json"
    options.write_text(json.dumps(nested_update(fixture_options, section, key, value)), encoding="utf-8")
    with pytest.raises(ElmoFileError, match=re.escape(message)):
        load_bilm(options, tiny_model_files[1])


def test_truncated_weights(tiny_model_files, tmp_path):
    data = tiny_model_files[1].read_bytes()
    truncated = tmp_path / "truncated.hdf5"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ElmoFileError, match=re.escape(str(truncated))):
        load_bilm(tiny_model_files[0], truncated)


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "the top level must be a JSON object"),
        (lambda o: {**o, "extra_setting": 1}, "unknown key 'extra_setting'"),
        (
            lambda o: {**o, "lstm": {k: v for k, v in o["lstm"].items() if k != "projection_dim"}},
            "missing key 'lstm.projection_dim'",
        ),
        (lambda o: nested_update(o, "char_cnn", "unknown_cnn_key", 1), "unknown key 'char_cnn.unknown_cnn_key'"),
        (lambda o: nested_update(o, "lstm", "n_layers", 3), "key 'lstm.n_layers' is 3"),
        (lambda o: nested_update(o, "char_cnn", "activation", "gelu"), "key 'char_cnn.activation' is 'gelu'"),
    ],
    ids=[
        "not-json",
        "not-object",
        "unknown-key",
        "missing-key",
        "unknown-nested-key",
        "bad-n-layers",
        "bad-activation",
    ],
)
def test_bad_options_name_file_and_key(tiny_model_files, fixture_options, tmp_path, text, message):
    options = tmp_path / "options.json"
    options.write_text(text if isinstance(text, str) else json.dumps(text(fixture_options)), encoding="utf-8")
    with pytest.raises(ElmoFileError, match=re.escape(message)) as error:
        load_bilm(options, tiny_model_files[1])
    assert str(options) in str(error.value)


@pytest.mark.parametrize("which", [0, 1], ids=["options", "weights"])
def test_missing_file_is_named(tiny_model_files, tmp_path, which):
    files = list(tiny_model_files)
    files[which] = tmp_path / "absent" / "file"
    with pytest.raises(ElmoFileError, match=re.escape(f"not found: {files[which]}")):
        load_bilm(*files)


def test_url_when_offline_names_the_url(tiny_model_files, monkeypatch):
    import cached_path

    def offline(url, *args, **kwargs):
        raise ConnectionError("network is unreachable")

    monkeypatch.setattr(cached_path, "cached_path", offline)
    url = "https://example.org/elmo/weights.hdf5"
    with pytest.raises(ElmoFileError, match=re.escape(url)):
        load_bilm(tiny_model_files[0], url)


def test_random_weights_when_no_weight_file(tiny_model_files):
    """``weight_file=None`` builds the architecture with random weights (for pretraining)."""
    model = load_bilm(tiny_model_files[0], None)
    assert model.options.lstm.dim == 64 and not model.training


@pytest.fixture
def silent_server():
    """A local http address whose server accepts connections and never answers."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield f"http://127.0.0.1:{server.getsockname()[1]}/weights.hdf5"
    server.close()


def test_silent_server_times_out(silent_server, tmp_path, monkeypatch):
    """Without a read timeout this call never returned; with 1 s and one retry it fails in ~2 s."""
    import time

    from spacy_elmo_mix.bilm.files import resolve_path

    monkeypatch.setattr("cached_path.common.CACHE_DIRECTORY", tmp_path / "cache")
    start = time.monotonic()
    with pytest.raises(ElmoFileError, match=re.escape(silent_server)):
        resolve_path(silent_server, timeout=1)
    assert time.monotonic() - start < 30


def test_timeout_from_environment(silent_server, tmp_path, monkeypatch):
    from spacy_elmo_mix.bilm.files import download_timeout, resolve_path
    from spacy_elmo_mix.errors import ElmoConfigError

    monkeypatch.setattr("cached_path.common.CACHE_DIRECTORY", tmp_path / "cache")
    monkeypatch.setenv("SPACY_ELMO_MIX_DOWNLOAD_TIMEOUT", "0.5")
    assert download_timeout() == 0.5 and download_timeout(3) == 3.0
    with pytest.raises(ElmoFileError, match="Read ?timed out|timed out|Timeout"):
        resolve_path(silent_server)
    monkeypatch.setenv("SPACY_ELMO_MIX_DOWNLOAD_TIMEOUT", "soon")
    with pytest.raises(
        ElmoConfigError, match="SPACY_ELMO_MIX_DOWNLOAD_TIMEOUT must be a positive number of seconds, got 'soon'"
    ):
        resolve_path(silent_server)


def test_unresolvable_host_fails_fast(tiny_model_files, tmp_path, monkeypatch):
    """Failed after 30-36 s (five retries with backoff, twice); now one short retry."""
    import time

    monkeypatch.setattr("cached_path.common.CACHE_DIRECTORY", tmp_path / "cache")
    start = time.monotonic()
    with pytest.raises(ElmoFileError, match=re.escape("http://nonexistent.invalid/x")):
        ElmoEmbedder(tiny_model_files[0], "http://nonexistent.invalid/x")
    assert time.monotonic() - start < 10


def test_download_limits_leave_cached_path_as_it_was():
    from cached_path import schemes

    from spacy_elmo_mix.bilm.files import _bounded_http

    before = dict(schemes._SCHEME_TO_CLIENT)
    with _bounded_http(1.0):
        assert schemes._SCHEME_TO_CLIENT["https"] is not before["https"]
    assert schemes._SCHEME_TO_CLIENT == before


@pytest.mark.parametrize(
    "section, key, value, unused",
    [
        (
            "char_cnn",
            "n_highway",
            1,
            "CNN_high_1/W_carry, CNN_high_1/W_transform, CNN_high_1/b_carry, CNN_high_1/b_transform",
        ),
        ("lstm", "n_layers", 1, "RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/B"),
    ],
)
def test_weights_the_options_do_not_use_are_named(
    tiny_model_files, fixture_options, tmp_path, section, key, value, unused
):
    """A weights file with more highway (or LSTM) layers than options.json says loaded and ignored them."""
    options = tmp_path / "options.json"
    options.write_text(json.dumps(nested_update(fixture_options, section, key, value)), encoding="utf-8")
    with pytest.raises(ElmoFileError, match=re.escape(unused)) as error:
        load_bilm(options, tiny_model_files[1])
    assert "options do not use" in str(error.value) and str(tiny_model_files[1]) in str(error.value)


def test_other_unused_datasets_warn(fixture_options, fixture_arrays, tmp_path):
    options, weights = write_model(
        tmp_path / "extra", fixture_options, {**fixture_arrays, "softmax/W": np.zeros((2, 2), np.float32)}
    )
    with pytest.warns(UserWarning, match="ignoring datasets that are not part of the biLM: softmax/W"):
        load_bilm(options, weights)


def test_integer_weights_are_rejected_not_cast(tiny_model_files, tmp_path):
    import shutil

    import h5py

    from spacy_elmo_mix.bilm.loading import load_bilm
    from spacy_elmo_mix.errors import ElmoFileError

    options, weights = tiny_model_files
    copy = tmp_path / "weights.hdf5"
    shutil.copy(weights, copy)
    with h5py.File(copy, "r+") as f:
        name = "char_embed"
        data = f[name][...]
        del f[name]
        f.create_dataset(name, data=data.astype("int32"))
    with pytest.raises(ElmoFileError, match="char_embed.*int32"):
        load_bilm(options, copy)
