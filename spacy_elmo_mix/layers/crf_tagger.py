"""The model of a CRF sequence labeller: ``tok2vec`` -> a linear layer to one score per tag
(the emissions) -> a CRF (``crf_layer``) over the tags.

The model's output is the emissions, one [n_tokens, n_tags] array per doc; the component turns them
into a loss (``crf_loss``) or a decoded tag sequence (``crf_decode``) through the ``crf`` ref.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

from spacy.tokens import Doc
from thinc.api import Linear, Model, chain, with_array
from thinc.types import Floats2d

from .crf_layer import CRFLayer


def CRFTaggerModel(
    tok2vec: Model[List[Doc], List[Floats2d]], nO: Optional[int] = None
) -> Model[List[Doc], List[Floats2d]]:
    """See ``spacy-elmo-mix.CRFTagger.v1``."""
    output = Linear(nO=nO)
    scorer = chain(tok2vec, with_array(output))
    crf = CRFLayer()
    return Model(
        "crf_tagger",
        _forward,
        init=_init,
        layers=[scorer, crf],
        dims={"nO": nO},
        refs={"tok2vec": tok2vec, "output": output, "crf": crf},
    )


def _forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    return model.layers[0](docs, is_train)


def _init(model: Model, X: Optional[List[Doc]] = None, Y: Optional[Tuple[Sequence[str], str]] = None) -> None:
    """Y: the tag names and their scheme (``tagging.tag_schemes``)."""
    if Y is not None:
        model.set_dim("nO", len(Y[0]), force=True)
        model.get_ref("output").set_dim("nO", len(Y[0]), force=True)
    model.layers[0].initialize(X=X)
    model.get_ref("crf").initialize(Y=Y)
