"""Registered, versioned builders. A released name is never edited: changes get a new version.

Architectures (``@architectures``):
- ``spacy-elmo-mix.BiLM.v3``: the biLM of the ``elmo`` component (files, frozen, batching, cache,
  compute precision); v1 and v2 were never released and are gone.
- ``spacy-elmo-mix.ElmoListener.v1``: a component's own mix of the shared component's layers.
- ``spacy-elmo-mix.ElmoInline.v1``: a biLM inside the component's own model (no shared component).
- ``spacy-elmo-mix.ElmoTok2Vec.v2``: ELMo vectors at a set scale or their raw one (optionally with
  spaCy's hash embeddings), a projection and a context encoder: the ``tok2vec`` of a
  tagger/NER/parser; v1 was never released and is gone.
- ``spacy-elmo-mix.BiLSTMTok2Vec.v1``: the paper's network up to its CRF (features -> BiLSTM layers).
- ``spacy-elmo-mix.CRFTagger.v1``: the model of the ``crf_ner`` and ``crf_tagger`` components.
Weighting schemes (``@layers``): ``spacy-elmo-mix.ScalarMix.v1``, ``spacy-elmo-mix.ConcatLayers.v1``,
``spacy-elmo-mix.PaperScheme.v1``.
"""

from __future__ import annotations

from typing import List, Optional

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Maxout, Model, chain, concatenate, with_array
from thinc.types import Floats2d, Floats3d

from .errors import ElmoConfigError
from .layers import bilm_model, scalar_mix
from .layers.bilstm_encoder import BiLSTMEncoder
from .layers.crf_tagger import CRFTaggerModel
from .layers.feature_scale import ScaledNorm
from .layers.inline import ElmoInline
from .layers.listener import ElmoListener


@registry.architectures("spacy-elmo-mix.BiLM.v3")
def build_bilm_v3(
    options_file: Optional[str] = None,
    weight_file: Optional[str] = None,
    frozen: bool = True,
    batch_size: int = 64,
    max_length: int = 256,
    cache_dir: Optional[str] = None,
    cache_memory_mb: float = 0,
    cache_dtype: str = "float32",
    compute_dtype: str = "float32",
) -> Model[List[Doc], List[Floats3d]]:
    """The ELMo biLM as a thinc model: docs -> ``[k + 1, n_tokens, width]`` arrays.

    Every setting takes effect as given when the pipeline is built or loaded (``spacy.load(path,
    config=...)``); the saved pipeline only supplies the biLM's options and weights.

    options_file, weight_file: ``options.json`` and ``weights.hdf5`` (paths or URLs), read at
        ``initialize`` and then stored inside the pipeline; both null: the embedded default model.
    frozen: keep the biLM's weights fixed (no backward pass through it); false fine-tunes it.
    batch_size: sentences per biLM call.
    max_length: longest sequence, in tokens; longer sentences (or docs without sentence
        boundaries) are cut into windows of this length.
    cache_dir: a folder for the on-disk layer cache of a frozen biLM (shared between runs and
        processes; precompute it with ``python -m spacy_elmo_mix cache``); null: memory only. For
        training only, set it in ``[initialize.components.elmo]`` instead (not saved); with a cache
        here, a different value there is an error (docs/cache.md).
    cache_memory_mb: memory budget of the in-memory layer cache (LRU); 0 (default: no hits on
        unique texts, see docs/cache.md) with no cache_dir disables caching.
    cache_dtype: ``float32`` (exact, default, as the cache command's) or ``float16`` (half the
        space; relative rounding <= 4.9e-4).
    compute_dtype: ``float32`` (exact, default), ``bfloat16``: the char-CNN's convolutions and
        all matrix products in bfloat16 (biases, gating, the LSTM cell state and the outputs stay
        float32; at most 0.6% of the largest output off float32 on trained models, see
        ``tests/test_bilm_bfloat16.py``; warns once on hardware without native bf16), or ``auto``:
        bfloat16 only where the hardware runs it natively (``bilm.precision``). Cached layers are
        kept apart per precision.
    """
    return bilm_model.BiLMModel(
        options_file,
        weight_file,
        frozen,
        batch_size,
        max_length,
        cache_dir,
        cache_memory_mb,
        cache_dtype,
        compute_dtype,
    )


@registry.architectures("spacy-elmo-mix.ElmoListener.v1")
def build_listener_v1(
    mixer: Model[List[Floats3d], List[Floats2d]], upstream: str = "*"
) -> Model[List[Doc], List[Floats2d]]:
    """Listen to an ``elmo`` component and combine its layers with ``mixer`` (a weighting scheme).

    mixer: the scheme this component learns or uses (``spacy-elmo-mix.ScalarMix.v1`` ...).
    upstream: the name of the ``elmo`` component (``"*"``: the first one found).
    """
    return ElmoListener(upstream, mixer)


@registry.architectures("spacy-elmo-mix.ElmoInline.v1")
def build_inline_v1(
    bilm: Model[List[Doc], List[Floats3d]], mixer: Model[List[Floats3d], List[Floats2d]]
) -> Model[List[Doc], List[Floats2d]]:
    """A biLM owned by this component, combined by ``mixer``; only the layers it needs are computed.

    bilm: a ``spacy-elmo-mix.BiLM.v3`` block. mixer: the weighting scheme.
    """
    return ElmoInline(bilm, mixer)


@registry.architectures("spacy-elmo-mix.ElmoTok2Vec.v2")
def build_tok2vec_v2(
    elmo: Model[List[Doc], List[Floats2d]],
    width: int,
    encoder: Model[List[Floats2d], List[Floats2d]],
    embed: Optional[Model[List[Doc], List[Floats2d]]] = None,
    maxout_pieces: int = 3,
    dropout: float = 0.0,
    elmo_scale: Optional[float] = 0.1,
) -> Model[List[Doc], List[Floats2d]]:
    """ELMo vectors -> projection to ``width`` -> context ``encoder``: a tok2vec for any component.

    elmo: an ``ElmoListener.v1`` or ``ElmoInline.v1`` block.
    width: size of the projection (and the encoder's input).
    encoder: e.g. ``spacy.MaxoutWindowEncoder.v2`` or ``spacy.TorchBiLSTMEncoder.v1`` (closest to
        the paper's BiLSTM), with the same ``width``.
    embed: optional spaCy embedding concatenated with ELMo before the projection (e.g.
        ``spacy.MultiHashEmbed.v2`` over NORM/PREFIX/SUFFIX/SHAPE, with static vectors if present).
    maxout_pieces: pieces of the Maxout projection. dropout: dropout after the projection.
    elmo_scale: each token's ELMo vector is normalized (mean 0, root mean square 1 over its
        dimensions) and multiplied by a learned scalar starting at this value, so ELMo's share of
        the projection's input no longer depends on the biLM's raw scale; spaCy's hash embeddings
        enter with root mean square 1. The default 0.1 lets the fast-learning hash embeddings lead
        at short budgets; trained for many epochs, larger values or null did better
        (docs/architectures.md, "Feature scale"). null: ELMo's vectors at their raw scale.
    """
    if elmo_scale is not None:
        if not elmo_scale > 0:
            raise ElmoConfigError(f"ElmoTok2Vec.v2: elmo_scale must be a positive number or null, got {elmo_scale!r}")
        elmo = chain(elmo, with_array(ScaledNorm(elmo_scale)))
    features = elmo if embed is None else concatenate(elmo, embed)
    projection: Model[List[Floats2d], List[Floats2d]] = with_array(
        Maxout(width, nP=maxout_pieces, dropout=dropout, normalize=True)
    )
    model = chain(features, projection, encoder)
    model.set_dim("nO", width)
    return model


@registry.architectures("spacy-elmo-mix.BiLSTMTok2Vec.v1")
def build_bilstm_tok2vec_v1(
    elmo: Optional[Model[List[Doc], List[Floats2d]]],
    embed: Optional[Model[List[Doc], List[Floats2d]]] = None,
    width: int = 100,
    depth: int = 2,
    dropout: float = 0.5,
    recurrent_dropout: float = 0.5,
) -> Model[List[Doc], List[Floats2d]]:
    """The paper's network up to its CRF: token features -> ``depth`` BiLSTM layers.

    elmo: an ``ElmoListener.v1`` or ``ElmoInline.v1`` block (any scheme), or null (no ELMo).
    embed: optional spaCy features concatenated with ELMo (e.g. ``spacy.MultiHashEmbed.v2``, with
        static vectors if present); the only features when ``elmo`` is null.
    width: LSTM units per direction (output width ``2 * width``); the paper: 100.
    depth: BiLSTM layers; the paper: 2.
    dropout: variational dropout of each layer's input (ELMo included) and the output; the paper: 0.5.
    recurrent_dropout: variational dropout of the recurrent state; the paper: 0.5.
    Both dropouts are set here; ``[training] dropout`` does not change them (``tagging.bilstm``).
    """
    if elmo is None and embed is None:
        raise ElmoConfigError("BiLSTMTok2Vec.v1: give elmo, embed or both; the network needs features")
    features = embed if elmo is None else (elmo if embed is None else concatenate(elmo, embed))
    assert features is not None  # elmo or embed: checked above
    model = chain(features, BiLSTMEncoder(width, depth, dropout, recurrent_dropout))
    model.set_dim("nO", 2 * width)
    return model


@registry.architectures("spacy-elmo-mix.CRFTagger.v1")
def build_crf_tagger_v1(
    tok2vec: Model[List[Doc], List[Floats2d]], nO: Optional[int] = None
) -> Model[List[Doc], List[Floats2d]]:
    """The model of ``crf_ner`` and ``crf_tagger``: ``tok2vec`` -> one linear score per tag -> a CRF.

    tok2vec: token vectors (``BiLSTMTok2Vec.v1``, ``ElmoTok2Vec.v2``, spaCy's ``Tok2VecListener``...).
    nO: the number of tags; null: set from the labels at initialize.
    """
    return CRFTaggerModel(tok2vec, nO)


# The weighting schemes are registered as they are: their docstrings live in layers/scalar_mix.py.
build_scalar_mix_v1 = registry.layers("spacy-elmo-mix.ScalarMix.v1")(scalar_mix.ScalarMix)
build_concat_v1 = registry.layers("spacy-elmo-mix.ConcatLayers.v1")(scalar_mix.ConcatLayers)
build_paper_scheme_v1 = registry.layers("spacy-elmo-mix.PaperScheme.v1")(scalar_mix.PaperScheme)
