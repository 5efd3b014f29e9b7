"""``ElmoListener``: a downstream component's view of the shared ``elmo`` component.

During training the ``elmo`` component computes the layers once per batch and sends them to every
listener (``receive``); each listener mixes them with its own weighting scheme (its ``mixer``
sub-layer) and returns the gradient to the component, which sums the gradients of all listeners
before the single backward pass through the biLM (none at all when the biLM is frozen). At
prediction time the listener reads ``doc._.elmo_layers``, set by the component; so does it in
training when the component sent nothing because it is frozen and annotating
(``[training] frozen_components`` and ``annotating_components``), as spaCy's own listeners do.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Protocol, Tuple, cast

from spacy.attrs import ORTH
from spacy.tokens import Doc
from thinc.api import Model
from thinc.types import Floats2d, Floats3d

from .scalar_mix import max_layer


class Upstream(Protocol):
    """What a listener needs of the component it listens to (the ``elmo`` component): its model,
    a sample of its layers to size the mixer, the layers of docs that have none, and a call when a
    batch's layers have been read."""

    model: Model

    def layer_sample(self) -> Floats3d: ...

    def layers_read(self, listener: Model, docs: List[Doc]) -> None: ...

    def compute_layers(self, docs: List[Doc]) -> List[Floats3d]: ...


DOC_ATTR = "elmo_layers"


class ElmoListener(Model):
    """Listens to an ``elmo`` component and mixes its layers with ``mixer``.

    upstream_name: the name of the ``elmo`` component to listen to (``"*"``: any).
    mixer: a weighting scheme (``ScalarMix``, ``ConcatLayers``...) from layer arrays to vectors.
    """

    name = "elmo_listener"

    def __init__(self, upstream_name: str, mixer: Model) -> None:
        Model.__init__(
            self, name=self.name, forward=listener_forward, init=listener_init, layers=[mixer], dims={"nO": None}
        )
        self.upstream_name = upstream_name
        self.upstream: Optional[Upstream] = None  # the component, set by Elmo.add_listener
        self._batch_id: Optional[int] = None
        self._outputs: Optional[List[Floats3d]] = None
        self._backprop: Optional[Callable] = None

    @property
    def mixer(self) -> Model:
        return self.layers[0]

    @property
    def max_layer(self) -> Optional[int]:
        """The highest ELMo layer this listener needs (``None``: all)."""
        return max_layer(self.mixer)

    @classmethod
    def get_batch_id(cls, docs: List[Doc]) -> int:
        """A hash of the batch's token texts in order, to check that ``receive`` and ``forward``
        agree: the same docs in another order would pair each doc with another's layers."""
        return hash(tuple(doc.to_array(ORTH).tobytes() for doc in docs))

    def receive(self, batch_id: int, outputs: List[Floats3d], backprop: Callable) -> None:
        """Store the layers the component computed for a batch, with the callback for their gradient."""
        self._batch_id, self._outputs, self._backprop = batch_id, outputs, backprop

    def verify_inputs(self, docs: List[Doc]) -> None:
        if self._batch_id is None and self._outputs is None:
            raise ValueError(
                f"The ELMo listener of '{self.upstream_name}' received no layers for this batch: the "
                "elmo component must be updated before the components that listen to it (call "
                "nlp.update with both, elmo first; a frozen elmo component must also be annotating, "
                "[training] annotating_components), or use nlp.replace_listeners to give this component "
                "its own copy of the biLM"
            )
        if self._batch_id != self.get_batch_id(docs):
            raise ValueError(
                "Mismatched batch in the ELMo listener: the docs given to this component are not the ones "
                f"the '{self.upstream_name}' component last processed (IDs {self.get_batch_id(docs)} vs "
                f"{self._batch_id}). Update the elmo component with the same docs first."
            )


def listener_init(model: ElmoListener, X: Optional[List[Doc]] = None, Y=None) -> None:
    """Size the mixer from the upstream biLM, checking the scheme's layers against it."""
    if model.upstream is None:
        raise ValueError(
            f"The ELMo listener is not connected to an elmo component named '{model.upstream_name}': "
            "add the elmo component before the components that listen to it"
        )
    if model.upstream.model.attrs["n_layers"] is None:
        raise ValueError("Initialize the elmo component before the components that listen to it")
    model.mixer.initialize(X=[model.upstream.layer_sample()])
    model.set_dim("nO", model.mixer.get_dim("nO"), force=True)


def listener_forward(model: ElmoListener, docs: List[Doc], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    if is_train and model._batch_id is None and _annotated(model, docs):
        # A frozen, annotating elmo component sends nothing: its layers are on the docs. The mixer
        # still learns; no gradient goes upstream.
        Y, mixer_backprop = model.mixer.begin_update(_doc_layers(model, docs))

        def mixer_only_backprop(dY: List[Floats2d]) -> List[Doc]:
            mixer_backprop(dY)
            return []

        return Y, mixer_only_backprop
    if is_train:
        model.verify_inputs(docs)
        Y, mixer_backprop = model.mixer.begin_update(model._outputs)
        upstream_backprop = model._backprop
        assert upstream_backprop is not None  # verify_inputs: receive gave this batch's layers

        def backprop(dY: List[Floats2d]) -> List[Doc]:
            upstream_backprop(mixer_backprop(dY))
            return []

        return Y, backprop
    Y = model.mixer.predict(_stored_layers(model, docs))
    if model.upstream is not None:
        model.upstream.layers_read(model, docs)  # the component may now shrink or drop them
    return Y, lambda dY: []


def _stored_layers(model: ElmoListener, docs: List[Doc]) -> List[Floats3d]:
    """``doc._.elmo_layers`` of each doc; computed through the upstream when absent (e.g. at initialize)."""
    if _annotated(model, docs):
        return _doc_layers(model, docs)
    if model.upstream is None:
        raise ValueError("These docs have no ELMo layers (doc._.elmo_layers): run the elmo component first")
    return model.upstream.compute_layers(docs)


def _annotated(model: ElmoListener, docs: List[Doc]) -> bool:
    """Whether every doc carries the ELMo layers this listener needs."""
    need = model.max_layer
    if need is None and model.upstream is not None:
        need = model.upstream.model.attrs["n_layers"] - 1
    return all(_has_layers(doc, need) for doc in docs)


def _doc_layers(model: ElmoListener, docs: List[Doc]) -> List[Floats3d]:
    return [cast(Floats3d, model.ops.asarray(doc._.get(DOC_ATTR))) for doc in docs]


def _has_layers(doc: Doc, need: Optional[int]) -> bool:
    layers = doc._.get(DOC_ATTR) if Doc.has_extension(DOC_ATTR) else None
    if layers is None or layers.shape[1] != len(doc):
        return False
    return need is None or layers.shape[0] > need
