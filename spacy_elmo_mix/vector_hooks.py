"""``doc.vector``, ``span.vector``, ``token.vector`` and ``similarity`` from ``doc.tensor`` (ELMo).

Without these hooks spaCy would fall back to the tensor with warning W007 for ``similarity``; with
them, similarity is the cosine of the mean ELMo vectors, and ``has_vector`` is true. A component
that writes no tensor (``set_tensor = false``) gives docs without other vectors hooks that say so,
and how to get them, instead of spaCy's warning about missing word vectors.
"""

from __future__ import annotations

import warnings
from functools import partial

import numpy as np
from spacy.tokens import Doc


def install_vector_hooks(doc: Doc) -> None:
    """Point ``doc``'s vector and similarity hooks at its ELMo tensor."""
    for hooks in (doc.user_hooks, doc.user_span_hooks, doc.user_token_hooks):
        hooks["vector"] = _vector
        hooks["has_vector"] = _has_vector
        hooks["similarity"] = _similarity
    doc.user_token_hooks["vector"] = _token_vector


def _token_vector(token) -> np.ndarray:
    return token.doc.tensor[token.i]


def _vector(obj) -> np.ndarray:
    doc = obj if isinstance(obj, Doc) else obj.doc
    start, end = (0, len(doc)) if isinstance(obj, Doc) else (obj.start, obj.end)
    if end <= start:
        return np.zeros((doc.tensor.shape[1] if doc.tensor.ndim == 2 else 0,), dtype="float32")
    return doc.tensor[start:end].mean(axis=0)


def _has_vector(obj) -> bool:
    return True


def _similarity(obj, other) -> float:
    a, b = obj.vector, other.vector
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(np.dot(a, b) / norm) if norm else 0.0


def install_no_vector_hooks(doc: Doc, component: str) -> None:
    """Point ``doc``'s vector and similarity hooks at a warning that the ``component`` (its name)
    writes no ``doc.tensor``; vectors are then empty and similarities 0.0, as spaCy's are without
    vectors."""
    for hooks in (doc.user_hooks, doc.user_span_hooks, doc.user_token_hooks):
        hooks["vector"] = partial(_no_vector, component)
        hooks["has_vector"] = _has_no_vector
        hooks["similarity"] = partial(_no_similarity, component)


def _warn_no_tensor(component: str) -> None:
    warnings.warn(
        f"no ELMo vectors: this pipeline's '{component}' component writes no doc.tensor (set_tensor = false, "
        "as in training configs that leave ELMo to the listening components); for vectors and similarity load it "
        f"with spacy.load(path, config={{'components': {{'{component}': {{'set_tensor': True}}}}}})",
        UserWarning,
        stacklevel=3,
    )


def _no_vector(component: str, obj) -> np.ndarray:
    _warn_no_tensor(component)
    return np.zeros((0,), dtype="float32")


def _has_no_vector(obj) -> bool:
    return False


def _no_similarity(component: str, obj, other) -> float:
    _warn_no_tensor(component)
    return 0.0
