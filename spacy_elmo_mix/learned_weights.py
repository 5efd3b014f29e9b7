"""What each component learned about the ELMo layers: normalized weights and gamma of its schemes."""

from __future__ import annotations

from typing import Any, Dict, List, cast

from spacy.language import Language


def learned_layer_weights(nlp: Language) -> Dict[str, List[dict]]:
    """Per component, one entry per scalar mix in its model (initialized ones only).

    Each entry: ``layers`` (ELMo layer indices), ``weights`` (``softmax(s)``, summing to 1),
    ``gamma``, ``trainable`` (whether the weights are learned).
    """
    from .layers.scalar_mix import normalized_weights

    found: Dict[str, List[dict]] = {}
    for name, component in nlp.components:
        models = [getattr(component, "model", None)]
        if getattr(component, "set_tensor", False):
            # the elmo component's own (fixed) scheme, when used (spaCy types components as callables)
            models.append(cast(Any, component).scheme)
        for model in models:
            if model is None or not hasattr(model, "walk"):
                continue
            for node in model.walk():
                if node.name == "scalar_mix" and node.has_param("s") and node.get_param("s") is not None:
                    found.setdefault(name, []).append(
                        {
                            "layers": list(node.attrs["resolved_layers"]),
                            "weights": [round(float(w), 6) for w in node.ops.to_numpy(normalized_weights(node))],
                            "gamma": round(float(node.get_param("gamma")[0]), 6),
                            "trainable": bool(node.attrs["trainable"]),
                        }
                    )
    return found


def format_layer_weights(weights: Dict[str, List[dict]]) -> str:
    """A human-readable table of :func:`learned_layer_weights` output."""
    if not weights:
        return "no ELMo scalar mixes found"
    lines = []
    for component, mixes in weights.items():
        for mix in mixes:
            pairs = "  ".join(f"layer {j} ({j + 1}.): {w:.3f}" for j, w in zip(mix["layers"], mix["weights"]))
            kind = "learned" if mix["trainable"] else "fixed"
            lines.append(f"{component:<12} {kind:<8} {pairs}  gamma: {mix['gamma']:.3f}")
    return "\n".join(lines)
