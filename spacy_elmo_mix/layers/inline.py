"""``ElmoInline``: a biLM owned by one component, followed by that component's weighting scheme."""

from __future__ import annotations

from typing import List

from spacy.tokens import Doc
from thinc.api import Model, chain
from thinc.types import Floats2d, Floats3d

from .scalar_mix import max_layer


def ElmoInline(
    bilm: Model[List[Doc], List[Floats3d]], mixer: Model[List[Floats3d], List[Floats2d]]
) -> Model[List[Doc], List[Floats2d]]:
    """``chain(bilm, mixer)``, computing only the layers ``mixer`` reads."""
    bilm.attrs["top_layer"] = max_layer(mixer)
    model = chain(bilm, mixer)
    model.name = "elmo_inline"
    return model
