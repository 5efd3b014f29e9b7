"""Thinc wrapper of the native biLM: ``List[Doc]`` -> one ``[k + 1, n_tokens, width]`` array per doc.

The torch module is built when the weights are loaded (at ``initialize``) and is stored inside the
model's bytes together with its options, so a saved pipeline needs neither the original files nor
the network. Before ``initialize`` the model holds an empty placeholder module.

Model attrs: ``settings`` (a :class:`BiLMSettings`: what the config gives) holds
- ``options_file``, ``weight_file``: where ``initialize`` reads the biLM (``None``: embedded default).
- ``frozen``: no gradient reaches the biLM and no backward pass is computed through it.
``top_layer``: the highest ELMo layer to compute (``None``: all); set by the component from what its
  schemes and listeners need, so unused LSTM layers never run.
- ``batch_size``: sequences per biLM call; ``max_length``: longest sequence (see ``segmentation``).
- ``cache_dir``, ``cache_memory_mb``, ``cache_dtype``: the layer cache of a frozen biLM (see
  ``layer_cache``): computed layers are kept in memory (LRU, this many MiB; 0 and no directory:
  no cache) and, with a directory, on disk, shared between runs. ``float32`` keeps exact values.
- ``compute_dtype``: ``float32`` (exact), ``bfloat16`` (convolutions and matrix products, see
  ``BiLM.set_compute_dtype``) or ``auto`` (bfloat16 only where the hardware runs it natively, see
  ``bilm.precision``); applied whenever the biLM is used, also after loading.
The settings are never stored in the model's bytes: a loaded pipeline uses the values of the config it
is loaded with (``spacy.load(path, config=...)``); only the biLM (options and weights) comes from the
bytes. Other attrs: ``top_layer`` (below) and ``n_layers``.
Dims: ``nO`` = layer width, set when the biLM is loaded; attr ``n_layers`` = layers the biLM offers.
"""

from __future__ import annotations

import hashlib
import weakref
from typing import TYPE_CHECKING, Callable, List, Optional, Tuple, cast

import numpy as np
import srsly
from spacy.tokens import Doc
from thinc.api import ArgsKwargs, Model, PyTorchShim, deserialize_attr, serialize_attr
from thinc.types import Floats3d

from ..errors import ElmoConfigError, ElmoFileError
from .segmentation import doc_segments

if TYPE_CHECKING:
    from .listener import ElmoListener

COMPUTE_DTYPES = ("float32", "bfloat16", "auto")


class BiLMSettings(dict):
    """The biLM's settings from its config (see the module docstring); not part of the model's bytes."""


@serialize_attr.register(BiLMSettings)
def _serialize_settings(_, value, name, model) -> bytes:
    return b""


@deserialize_attr.register(BiLMSettings)
def _deserialize_settings(current, value, name, model):
    """The config's settings win over whatever the bytes hold."""
    return current


def settings(model: Model) -> BiLMSettings:
    """The settings of a biLM model (files, frozen, batching, cache, precision)."""
    return model.attrs["settings"]


def BiLMModel(
    options_file: Optional[str],
    weight_file: Optional[str],
    frozen: bool,
    batch_size: int,
    max_length: int,
    cache_dir: Optional[str] = None,
    cache_memory_mb: float = 512,
    cache_dtype: str = "float32",
    compute_dtype: str = "float32",
) -> Model[List[Doc], List[Floats3d]]:
    """Build the (not yet loaded) biLM model; see the module docstring for the attrs."""
    import torch

    from .torch_shim import TorchShim

    if (options_file is None) != (weight_file is None):
        raise ElmoConfigError("give both options_file and weight_file, or neither (the embedded default model)")
    _check_cache_settings(cache_memory_mb, cache_dtype)
    if compute_dtype not in COMPUTE_DTYPES:
        raise ElmoConfigError(f"compute_dtype must be 'float32' (exact), 'bfloat16' or 'auto', got {compute_dtype!r}")
    for name, value in (("batch_size", batch_size), ("max_length", max_length)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ElmoConfigError(f"{name} must be a positive integer, got {value!r}")
    shim = TorchShim(torch.nn.Module(), serialize_model=_serialize_bilm, deserialize_model=_deserialize_bilm)
    return Model(
        "elmo_bilm",
        bilm_forward,
        init=bilm_init,
        shims=[shim],
        dims={"nO": None},
        attrs={
            "settings": BiLMSettings(
                options_file=None if options_file is None else str(options_file),
                weight_file=None if weight_file is None else str(weight_file),
                frozen=bool(frozen),
                batch_size=batch_size,
                max_length=max_length,
                cache_dir=None if cache_dir is None else str(cache_dir),
                cache_memory_mb=cache_memory_mb,
                cache_dtype=cache_dtype,
                compute_dtype=compute_dtype,
            ),
            "top_layer": None,
            "n_layers": None,
            "replace_listener": replace_listener,
            "replace_listener_cfg": replace_listener_cfg,
        },
    )


def _check_cache_settings(cache_memory_mb, cache_dtype: str) -> None:
    if cache_dtype not in ("float16", "float32"):
        raise ElmoConfigError(f"cache_dtype must be 'float16' or 'float32', got {cache_dtype!r}")
    if isinstance(cache_memory_mb, bool) or not isinstance(cache_memory_mb, (int, float)) or cache_memory_mb < 0:
        raise ElmoConfigError(f"cache_memory_mb must be a number >= 0, got {cache_memory_mb!r}")


def use_cache(model: Model, cache_dir: Optional[str], cache_memory_mb: float, cache_dtype: str) -> None:
    """Give ``model`` these layer cache settings from now on, in this process only (see the module
    docstring for their meaning): they are not part of the pipeline's config or bytes."""
    _check_cache_settings(cache_memory_mb, cache_dtype)
    settings(model).update(
        cache_dir=None if cache_dir is None else str(cache_dir),
        cache_memory_mb=cache_memory_mb,
        cache_dtype=cache_dtype,
    )


def replace_listener(bilm_copy: Model, listener: "ElmoListener", component) -> Model:
    """For ``nlp.replace_listeners``: the listener becomes a biLM of its own plus its mixer."""
    from .inline import ElmoInline

    return ElmoInline(bilm_copy, listener.mixer)


def replace_listener_cfg(bilm_cfg: dict, listener_cfg: dict) -> dict:
    """The config of the ``ElmoInline.v1`` block that replaces an ``ElmoListener.v1`` block."""
    found = _find_listener_cfg(listener_cfg)
    if found is None:
        raise ValueError("No spacy-elmo-mix.ElmoListener.v1 block found in the listener's config")
    return {"@architectures": "spacy-elmo-mix.ElmoInline.v1", "bilm": dict(bilm_cfg), "mixer": dict(found["mixer"])}


def _find_listener_cfg(cfg) -> Optional[dict]:
    if not isinstance(cfg, dict):
        return None
    if str(cfg.get("@architectures", "")).startswith("spacy-elmo-mix.ElmoListener."):
        return cfg
    return next((f for f in map(_find_listener_cfg, cfg.values()) if f is not None), None)


def get_bilm(model: Model):
    """The torch ``BiLM`` inside ``model``, set to the model's ``compute_dtype`` (a loaded or
    deserialized module starts in float32); a clear error before ``initialize``."""
    from ..bilm.modules import BiLM

    module = model.shims[0]._model
    if not isinstance(module, BiLM):
        raise ValueError("The ELMo biLM is not loaded yet: call nlp.initialize() (or load a trained pipeline) first")
    from ..bilm.precision import resolve_compute_dtype

    device = cast(PyTorchShim, model.shims[0]).device  # a TorchShim
    return module.set_compute_dtype(resolve_compute_dtype(settings(model)["compute_dtype"], device))


def set_bilm(model: Model, bilm) -> None:
    """Put a loaded ``BiLM`` into ``model`` and record its width and layer count."""
    shim = cast(PyTorchShim, model.shims[0])  # a TorchShim
    shim._model = bilm.to(shim.device)
    model.set_dim("nO", bilm.options.output_dim, force=True)
    model.attrs["n_layers"] = bilm.n_output_layers


def bilm_init(model: Model, X: Optional[List[Doc]] = None, Y=None) -> None:
    """Load the biLM from ``options_file``/``weight_file`` (or the embedded default)."""
    from ..bilm.loading import load_bilm
    from ..default_model import default_model_files

    options, weights = settings(model)["options_file"], settings(model)["weight_file"]
    if options is None:
        options, weights = default_model_files()
    set_bilm(model, load_bilm(options, weights))


def bilm_forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[List[Floats3d], Callable]:
    segments = [(i, s, e) for i, doc in enumerate(docs) for s, e in doc_segments(doc, settings(model)["max_length"])]
    tokens = [[t.text for t in docs[i][s:e]] for i, s, e in segments]
    with_grad = is_train and not settings(model)["frozen"]
    cache = None if with_grad else layer_cache(model)
    if cache is None:
        arrays, chunk_backprops = _compute(model, tokens, with_grad)
    else:
        top = model.attrs["top_layer"]
        arrays = [
            model.ops.asarray(a)
            for a in cache.get_or_compute(
                tokens, top, lambda missing: _to_numpy(model, _compute(model, missing, False)[0])
            )
        ]
    outputs = _assemble(model, docs, segments, arrays)

    def backprop(d_outputs: List[Floats3d]) -> List[Doc]:
        if with_grad:
            d_segments = [d_outputs[i][:, s:e] for i, s, e in segments]
            for chunk, chunk_backprop in chunk_backprops:
                chunk_backprop([d_segments[k] for k in chunk])
        return []

    return outputs, backprop


def _compute(model: Model, tokens: List[List[str]], with_grad: bool):
    """ELMo layers of each token list (in input order) and ``(chunk, backprop)`` pairs when ``with_grad``.

    Sequences are sorted by length before they are cut into ``batch_size`` chunks, so each biLM call
    sees similar lengths (fewer idle rows per recurrent step); results do not depend on it.
    """
    order = sorted(range(len(tokens)), key=lambda k: len(tokens[k]), reverse=True)
    size = settings(model)["batch_size"]
    chunks = [order[i : i + size] for i in range(0, len(order), size)]
    arrays: List = [None] * len(tokens)
    backprops = []
    for chunk in chunks:
        chunk_arrays, chunk_backprop = _run_chunk(model, [tokens[k] for k in chunk], with_grad)
        for k, array in zip(chunk, chunk_arrays):
            arrays[k] = array
        backprops.append((chunk, chunk_backprop))
    return arrays, backprops


def _run_chunk(model: Model, tokens: List[List[str]], with_grad: bool):
    """ELMo layers of one chunk of token lists: per-list arrays and a backprop callback."""
    import torch
    from thinc.api import torch2xp, xp2torch

    from ..bilm.chars import batch_to_char_ids

    bilm = get_bilm(model)
    device = cast(PyTorchShim, model.shims[0]).device  # a TorchShim
    char_ids = torch.from_numpy(batch_to_char_ids(tokens, bilm.options.char_cnn.max_characters_per_token)).to(device)
    lengths = torch.tensor([len(t) for t in tokens], dtype=torch.int64)
    top = model.attrs["top_layer"]
    if not with_grad:
        with torch.no_grad():
            layers = bilm(char_ids, lengths, top_layer=top)
        return [torch2xp(layers[:, b, : len(t)]) for b, t in enumerate(tokens)], None
    layers, torch_backprop = model.shims[0].begin_update(
        ArgsKwargs(args=(char_ids, lengths), kwargs={"top_layer": top})
    )

    def backprop(d_arrays):
        grad = torch.zeros_like(layers)
        for b, d in enumerate(d_arrays):
            grad[:, b, : d.shape[1]] = xp2torch(d, device=device)
        torch_backprop(ArgsKwargs(args=(layers,), kwargs={"grad_tensors": grad}))

    return [torch2xp(layers[:, b, : len(t)].detach()) for b, t in enumerate(tokens)], backprop


def _to_numpy(model: Model, arrays: List) -> List[np.ndarray]:
    return [model.ops.to_numpy(a) for a in arrays]


# Keyed by the loaded torch biLM: a new biLM (initialize, from_bytes) gets a new cache, and a
# cache goes away with its biLM.
_CACHES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def layer_cache(model: Model):
    """The model's :class:`~spacy_elmo_mix.cache.LayerCache` (None when disabled).

    One cache per loaded biLM, keyed by its weights' fingerprint. Only used for a frozen biLM.
    """
    config = settings(model)
    if not config["cache_memory_mb"] and config["cache_dir"] is None:
        return None
    bilm = get_bilm(model)
    key = (config["cache_dir"], config["cache_memory_mb"], config["cache_dtype"])
    if bilm not in _CACHES or _CACHES[bilm][0] != key:
        from ..cache import LayerCache

        cache = LayerCache.for_model(
            bilm, config["cache_dir"], memory_bytes=int(config["cache_memory_mb"] * 2**20), dtype=config["cache_dtype"]
        )
        _CACHES[bilm] = (key, cache)
    return _CACHES[bilm][1]


def _assemble(model: Model, docs, segments, arrays) -> List[Floats3d]:
    xp = model.ops.xp
    n_out = (model.attrs["top_layer"] if model.attrs["top_layer"] is not None else model.attrs["n_layers"] - 1) + 1
    width = model.get_dim("nO")
    pieces: List[list] = [[] for _ in docs]
    for (i, _, _), array in zip(segments, arrays):
        pieces[i].append(array)
    return [
        xp.ascontiguousarray(xp.concatenate(p, axis=1)) if p else xp.zeros((n_out, 0, width), dtype="float32")
        for p in pieces
    ]


def _serialize_bilm(module) -> bytes:
    """The biLM's options and weights, with a checksum of both (verified by ``_deserialize_bilm``)."""
    from thinc.shims.pytorch import default_serialize_torch_model

    from ..bilm.modules import BiLM

    if not isinstance(module, BiLM):
        return srsly.msgpack_dumps({"options": None, "state": b""})
    options = module.options.to_json_dict()
    state = default_serialize_torch_model(module)
    return srsly.msgpack_dumps({"options": options, "state": state, "blake2b": _checksum(options, state)})


def _checksum(options: dict, state: bytes) -> str:
    digest = hashlib.blake2b(srsly.json_dumps(options, sort_keys=True).encode("utf8"), digest_size=32)
    digest.update(state)
    return digest.hexdigest()


def _deserialize_bilm(module, data: bytes, device):
    from thinc.shims.pytorch import default_deserialize_torch_model

    from ..bilm.modules import BiLM
    from ..bilm.options import BiLMOptions

    msg = srsly.msgpack_loads(data)
    if msg["options"] is None:
        return module
    # Pipelines saved before the checksum existed have none; any saved since must match it.
    if "blake2b" in msg and msg["blake2b"] != _checksum(msg["options"], msg["state"]):
        raise ElmoFileError("the biLM's weights are damaged (checksum mismatch)")
    bilm = BiLM(BiLMOptions.from_dict(msg["options"], source="the serialized pipeline"))
    return default_deserialize_torch_model(bilm, msg["state"], device)
