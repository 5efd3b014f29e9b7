"""Reading and writing ``weights.hdf5`` in the bilm-tf / AllenNLP layout.

Dataset names and shapes (``P`` = projection_dim, ``C`` = lstm.dim, ``F`` = total char filters):

- ``char_embed [261, char_dim]`` (character id ``k`` uses row ``k - 1``; id 0 is padding)
- ``CNN/W_cnn_i [1, width, char_dim, n]``, ``CNN/b_cnn_i [n]``
- ``CNN_high_k/W_transform``, ``W_carry [F, F]``, ``b_transform``, ``b_carry [F]`` (TF ``x @ W``)
- ``CNN_proj/W_proj [F, P]``, ``CNN_proj/b_proj [P]``
- ``RNN_d/RNN/MultiRNNCell/Cell{l}/LSTMCell/W_0 [input + P, 4C]`` (input rows above recurrent rows,
  gates i, j, f, o), ``B [4C]`` (forget bias without the +1), ``W_P_0 [C, P]``; d = 0 forward, 1
  backward. One-layer files written by bilm-tf without ``MultiRNNCell`` (``RNN_d/RNN/LSTMCell``) load too.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Dict, Iterator, List, Tuple, Union

import numpy as np
import torch

from ..atomic import atomic_write
from ..errors import ElmoFileError
from .modules import BiLM

# The largest |weight| a file may hold: about 3000x the largest value of the trained biLMs at hand
# (the bilm-tf fixture, the random reference model and the embedded default model peak at 2.0, 3.5
# and 2.1). Trained weights stay O(1): a gate or cell pre-activation of 100 already saturates its
# sigmoid/tanh to float32 precision, so training has no use for a weight near 1e4. Damaged bytes
# in a float32 dataset mostly hit the exponent and give values such as 1e25 or 1e38, which load
# silently and change every vector; damage that gives a plausible value cannot be told from a weight.
MAX_ABS_WEIGHT = 1e4


def _tf_arrays(model: BiLM) -> Iterator[Tuple[str, np.ndarray]]:
    """The model's parameters as ``(dataset name, array in the file's layout)`` pairs."""

    def a(t: torch.Tensor) -> np.ndarray:
        return t.detach().to("cpu", torch.float32).numpy()

    cnn = model.char_cnn
    yield "char_embed", a(cnn.char_embedding[1:])
    for i, conv in enumerate(cnn.convolutions):
        assert conv.bias is not None  # CharCNN's convolutions have biases
        # torch [n, char_dim, width] -> TF [1, width, char_dim, n]
        yield f"CNN/W_cnn_{i}", a(conv.weight).transpose(2, 1, 0)[None]
        yield f"CNN/b_cnn_{i}", a(conv.bias)
    for k, highway in enumerate(cnn.highways):
        w_transform, w_carry = a(highway.weight).reshape(2, -1, highway.weight.shape[1])
        b_transform, b_carry = a(highway.bias).reshape(2, -1)
        yield f"CNN_high_{k}/W_transform", w_transform.T
        yield f"CNN_high_{k}/W_carry", w_carry.T
        yield f"CNN_high_{k}/b_transform", b_transform
        yield f"CNN_high_{k}/b_carry", b_carry
    yield "CNN_proj/W_proj", a(cnn.projection.weight).T
    yield "CNN_proj/b_proj", a(cnn.projection.bias)
    for d, stack in enumerate(model.stacks):
        for k, layer in enumerate(stack):
            prefix = f"RNN_{d}/RNN/MultiRNNCell/Cell{k}/LSTMCell"
            yield f"{prefix}/W_0", np.concatenate([a(layer.w_input).T, a(layer.w_recurrent).T])
            yield f"{prefix}/B", a(layer.bias)
            yield f"{prefix}/W_P_0", a(layer.w_projection).T


def save_weights(model: BiLM, path: Union[str, Path]) -> None:
    """Write ``weights.hdf5`` atomically in the bilm-tf layout (float32)."""
    import h5py

    with atomic_write(Path(path)) as tmp:
        with h5py.File(tmp, "w") as f:
            for name, array in _tf_arrays(model):
                f.create_dataset(name, data=np.ascontiguousarray(array, dtype=np.float32))


def load_weights(model: BiLM, path: Union[str, Path]) -> None:
    """Fill ``model`` from a bilm-tf/AllenNLP ``weights.hdf5``.

    Raises :class:`ElmoFileError` naming the file and dataset for a missing dataset, a shape that
    disagrees with the options, non-finite values or values no trained network has (|w| above
    ``MAX_ABS_WEIGHT``: a damaged file), a file that is not readable HDF5, or biLM
    datasets (``char_embed``, ``CNN*``, ``RNN_*``) that the options do not use (e.g. more highway
    layers than ``options.json`` says); other unused datasets are named in a warning.
    """
    import h5py

    path = Path(path)
    try:
        f = h5py.File(path, "r")
    except FileNotFoundError:
        raise ElmoFileError(f"ELMo weight file not found: {path}") from None
    except OSError as exc:
        raise ElmoFileError(
            f"ELMo weight file {path} is not a readable HDF5 file (truncated or corrupt?): {exc}"
        ) from None
    with f:
        expected = dict(_tf_arrays(model))
        arrays: Dict[str, np.ndarray] = {}
        used = set()
        for name, like in expected.items():
            used.add(_found_name(f, name))
            arrays[name] = _read_dataset(f, path, name, like.shape)
        _check_unused(path, sorted(set(_dataset_names(f)) - used))
    _assign(model, arrays)


BILM_PREFIXES = ("char_embed", "CNN", "RNN_")


def _dataset_names(f) -> List[str]:
    import h5py

    names: List[str] = []
    f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
    return names


def _check_unused(path: Path, unused: List[str]) -> None:
    """Unused biLM datasets mean the options describe another model: an error; others a warning."""
    bilm = [n for n in unused if n.startswith(BILM_PREFIXES)]
    if bilm:
        raise ElmoFileError(
            f"ELMo weight file {path} has datasets the options do not use: {', '.join(bilm[:8])}"
            f"{' ...' if len(bilm) > 8 else ''} (options and weights disagree: check n_highway, filters, n_layers)"
        )
    if unused:
        warnings.warn(
            f"ELMo weight file {path}: ignoring datasets that are not part of the biLM: {', '.join(unused[:8])}",
            stacklevel=3,
        )


def _found_name(f, name: str) -> str:
    """``name``, or its one-layer bilm-tf spelling (without ``MultiRNNCell/Cell0``) when only that exists."""
    if name not in f and "/MultiRNNCell/Cell0/" in name:
        alternative = name.replace("/MultiRNNCell/Cell0/", "/")
        if alternative in f:
            return alternative
    return name


def _read_dataset(f, path: Path, name: str, shape: Tuple[int, ...]) -> np.ndarray:
    import h5py

    found = _found_name(f, name)
    if found not in f or not isinstance(f[found], h5py.Dataset):
        raise ElmoFileError(
            f"ELMo weight file {path} has no dataset '{name}' (options and weights disagree, or the file is incomplete)"
        )
    dataset = f[found]
    if tuple(dataset.shape) != tuple(shape):
        raise ElmoFileError(
            f"ELMo weight file {path}: dataset '{found}' has shape {tuple(dataset.shape)}, "
            f"expected {tuple(shape)} from the options"
        )
    if dataset.dtype.kind != "f":
        raise ElmoFileError(
            f"ELMo weight file {path}: dataset '{found}' holds {dataset.dtype} values, expected floating point"
        )
    try:
        array = np.asarray(dataset[...], dtype=np.float32)
    except (OSError, ValueError, TypeError) as exc:
        raise ElmoFileError(
            f"ELMo weight file {path}: cannot read dataset '{found}' (truncated or corrupt?): {exc}"
        ) from None
    _check_plausible(array, path, found)
    return array


def _check_plausible(array: np.ndarray, path: Path, name: str) -> None:
    """ElmoFileError unless every value of ``array`` is finite and within ``MAX_ABS_WEIGHT``.

    array: the dataset's values as read (float32); path: the weight file; name: the dataset's path
    inside it. The message gives the first bad value and its index (damaged bytes, not a model).
    """
    if not np.isfinite(array).all():
        raise ElmoFileError(
            f"ELMo weight file {path}: dataset '{name}' contains NaN or infinite values (a damaged file?)"
        )
    magnitude = np.abs(array)
    if array.size and magnitude.max() > MAX_ABS_WEIGHT:
        index = np.unravel_index(int(np.argmax(magnitude > MAX_ABS_WEIGHT)), array.shape)
        raise ElmoFileError(
            f"ELMo weight file {path}: dataset '{name}' holds {array[index]:.6g} at index {tuple(map(int, index))}, "
            f"beyond the |w| <= {MAX_ABS_WEIGHT:g} of any trained biLM (a damaged file?)"
        )


def _assign(model: BiLM, arrays: Dict[str, np.ndarray]) -> None:
    def t(array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(array))

    cnn = model.char_cnn
    with torch.no_grad():
        cnn.char_embedding.zero_()
        cnn.char_embedding[1:].copy_(t(arrays["char_embed"]))
        for i, conv in enumerate(cnn.convolutions):
            assert conv.bias is not None  # CharCNN's convolutions have biases
            conv.weight.copy_(t(arrays[f"CNN/W_cnn_{i}"][0].transpose(2, 1, 0)))
            conv.bias.copy_(t(arrays[f"CNN/b_cnn_{i}"]))
        for k, highway in enumerate(cnn.highways):
            p = f"CNN_high_{k}"
            highway.weight.copy_(t(np.concatenate([arrays[f"{p}/W_transform"].T, arrays[f"{p}/W_carry"].T])))
            highway.bias.copy_(t(np.concatenate([arrays[f"{p}/b_transform"], arrays[f"{p}/b_carry"]])))
        cnn.projection.weight.copy_(t(arrays["CNN_proj/W_proj"].T))
        cnn.projection.bias.copy_(t(arrays["CNN_proj/b_proj"]))
        for d, stack in enumerate(model.stacks):
            for k, layer in enumerate(stack):
                p = f"RNN_{d}/RNN/MultiRNNCell/Cell{k}/LSTMCell"
                w = arrays[f"{p}/W_0"].T
                n_in = layer.w_input.shape[1]
                layer.w_input.copy_(t(w[:, :n_in]))
                layer.w_recurrent.copy_(t(w[:, n_in:]))
                layer.bias.copy_(t(arrays[f"{p}/B"]))
                layer.w_projection.copy_(t(arrays[f"{p}/W_P_0"].T))
