"""The ``elmo`` pipeline component: computes ELMo layers once and shares them with listeners.

Per ``Doc`` it stores every computed layer in ``doc._.elmo_layers`` (a float32 numpy array
``[k + 1, n_tokens, width]``: layer 0 = the char-CNN token vector twice, 1..k = the LSTM layers) and
writes its own fixed combination of them (``scheme``) to ``doc.tensor``, so ``token.vector``,
``doc.vector`` and ``similarity`` use ELMo without any training. Components that listen to it
(``spacy-elmo-mix.ElmoListener.v1``) each learn their own combination.

Only the layers something needs are computed: ``k`` is the highest layer used by ``scheme`` and by
every listener, so a pipeline whose schemes use layers 0 and 1 never runs the top LSTM.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, cast
from weakref import WeakKeyDictionary

import srsly
from spacy import util
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.vocab import Vocab
from thinc.api import Model, Optimizer
from thinc.types import Floats3d

from .atomic import write_bytes_atomic
from .errors import ElmoConfigError, ElmoFileError
from .layers.bilm_model import settings, use_cache
from .layers.listener import DOC_ATTR, ElmoListener
from .layers.scalar_mix import max_layer
from .vector_hooks import install_no_vector_hooks, install_vector_hooks

DEFAULT_CONFIG_STR = """
[elmo]
set_tensor = true
keep_layers = "auto"

[elmo.model]
@architectures = "spacy-elmo-mix.BiLM.v3"
options_file = null
weight_file = null
frozen = true
batch_size = 64
max_length = 256
cache_dir = null
cache_memory_mb = 0
cache_dtype = "float32"
compute_dtype = "float32"

[elmo.scheme]
@layers = "spacy-elmo-mix.ScalarMix.v1"
layers = null
trainable = false
trainable_gamma = false
"""


CACHE_SETTINGS = ("cache_dir", "cache_memory_mb", "cache_dtype")
# What stays in doc._.elmo_layers once every listener has read them (see make_elmo).
KEEP_LAYERS = ("auto", "float32", "float16", "none")


def _default_config() -> dict:
    from thinc.api import Config

    return Config().from_str(DEFAULT_CONFIG_STR)["elmo"]


def install_extensions() -> None:
    """Register ``Doc._.elmo_layers`` (idempotent)."""
    if not Doc.has_extension(DOC_ATTR):
        Doc.set_extension(DOC_ATTR, default=None)


@Language.factory("elmo", default_config=_default_config(), assigns=[f"doc._.{DOC_ATTR}", "doc.tensor"])
def make_elmo(nlp: Language, name: str, model: Model, scheme: Model, set_tensor: bool, keep_layers: str) -> "Elmo":
    """Create the ``elmo`` component.

    model: the biLM (``spacy-elmo-mix.BiLM.v3``: its files, ``frozen``, batching, cache, precision).
    scheme: the fixed weighting scheme for ``doc.tensor`` (default: average of all layers); it is
        not trained by this component.
    set_tensor: write the scheme's vectors to ``doc.tensor``.
    keep_layers: what stays in ``doc._.elmo_layers`` once every listening component has read
        them (at once when nothing listens): ``float32`` (all of it, as computed), ``float16`` (a
        half-size copy), ``none`` (nothing: the docs travel light, e.g. in a ``DocBin``), or
        ``auto`` (the default): ``none`` when components listen (the layers were their input),
        ``float32`` when none do (the layers are the pipeline's output). A listening component
        that does not run (disabled) leaves the layers as they are.
    """
    if keep_layers not in KEEP_LAYERS:
        raise ElmoConfigError(
            f"[components.{name}] keep_layers = {keep_layers!r}: expected one of {', '.join(KEEP_LAYERS)}"
        )
    return Elmo(nlp.vocab, model, scheme, name=name, set_tensor=set_tensor, keep_layers=keep_layers)


class Elmo(TrainablePipe):
    """Computes ELMo layers for docs and broadcasts them to listening components."""

    def __init__(
        self,
        vocab: Vocab,
        model: Model,
        scheme: Model,
        name: str = "elmo",
        set_tensor: bool = True,
        keep_layers: str = "auto",
    ):
        self.vocab = vocab
        self.model = model
        self.scheme = scheme
        self.name = name
        self.set_tensor = set_tensor
        self.keep_layers = keep_layers
        # The listeners (ids) that have yet to read each annotated doc's layers.
        self._unread: "WeakKeyDictionary[Doc, set]" = WeakKeyDictionary()
        self.listener_map: Dict[str, List[ElmoListener]] = {}
        self.cfg: Dict = {}
        # The pipeline's own cache settings ([components.<name>.model]), kept apart from the
        # process-only ones that initialize gives the model.
        self._own_cache = {key: settings(model)[key] for key in CACHE_SETTINGS}
        install_extensions()

    # -- listeners (spaCy's listened-to-component protocol) --------------------------------------
    @property
    def listeners(self) -> List[ElmoListener]:
        return [m for c in self.listening_components for m in self.listener_map[c]]

    @property
    def listening_components(self) -> List[str]:
        return list(self.listener_map.keys())

    def add_listener(self, listener: ElmoListener, component_name: str) -> None:
        self.listener_map.setdefault(component_name, [])
        if listener not in self.listener_map[component_name]:
            self.listener_map[component_name].append(listener)
        listener.upstream = self

    def remove_listener(self, listener: ElmoListener, component_name: str) -> bool:
        if listener in self.listener_map.get(component_name, []):
            self.listener_map[component_name].remove(listener)
            if not self.listener_map[component_name]:
                del self.listener_map[component_name]
            listener.upstream = None
            return True
        return False

    def find_listeners(self, component) -> None:
        """Connect the ``ElmoListener`` layers in ``component``'s model that name this component."""
        model = getattr(component, "model", None)
        if not isinstance(model, Model):
            return
        for node in model.walk():
            if isinstance(node, ElmoListener) and node.upstream_name in ("*", self.name):
                self.add_listener(node, component.name)

    # -- computing ------------------------------------------------------------------------------
    def required_top_layer(self) -> Optional[int]:
        """The highest layer needed by the scheme and the listeners (``None``: all)."""
        needs = [listener.max_layer for listener in self.listeners]
        if self.set_tensor:
            needs.append(max_layer(self.scheme))
        return None if not needs or None in needs else max(cast(List[int], needs))  # no None: checked

    def compute_layers(self, docs: List[Doc], is_train: bool = False):
        """ELMo layers of ``docs`` (and, when ``is_train``, the backprop callback)."""
        self.model.attrs["top_layer"] = self.required_top_layer()
        if is_train:
            return self.model.begin_update(docs)
        return self.model.predict(docs)

    def predict(self, docs: Iterable[Doc]) -> List[Floats3d]:
        return self.compute_layers(list(docs))

    def set_annotations(self, docs: Iterable[Doc], layers: List[Floats3d]) -> None:
        docs = list(docs)
        mixed = self.scheme.predict(layers) if self.set_tensor and docs else None
        readers = {id(listener) for listener in self.listeners}
        for i, (doc, doc_layers) in enumerate(zip(docs, layers)):
            doc._.set(DOC_ATTR, self.model.ops.to_numpy(doc_layers))
            if mixed is not None:
                doc.tensor = self.model.ops.to_numpy(mixed[i])
                install_vector_hooks(doc)
            elif not len(doc.vocab.vectors):
                install_no_vector_hooks(doc, self.name)
            if readers:
                self._unread[doc] = set(readers)
            else:
                self._keep(doc, listened=False)

    def layers_read(self, listener: ElmoListener, docs: Iterable[Doc]) -> None:
        """Note that ``listener`` has read the layers of ``docs`` (at prediction); a doc whose
        listeners have all read them keeps what ``keep_layers`` says."""
        for doc in docs:
            unread = self._unread.get(doc)
            if unread is None:
                continue
            unread.discard(id(listener))
            if not unread:
                del self._unread[doc]
                self._keep(doc, listened=True)

    def _keep(self, doc: Doc, listened: bool) -> None:
        """Reduce ``doc._.elmo_layers`` to what ``keep_layers`` keeps (``listened``: components
        listen to this one, which decides ``auto``)."""
        keep = ("none" if listened else "float32") if self.keep_layers == "auto" else self.keep_layers
        if keep == "none":
            doc._.set(DOC_ATTR, None)
        elif keep == "float16":
            doc._.set(DOC_ATTR, doc._.get(DOC_ATTR).astype("float16"))

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Optimizer] = None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        """Compute the layers with gradient tracking (unless frozen) and send them to the listeners.

        The gradients of all listeners are summed; the last listener's backward call runs the
        single backward pass through the biLM and the optimizer step.
        """
        losses = {} if losses is None else losses
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        validate_examples(examples, "Elmo.update")
        docs = [eg.predicted for eg in examples]
        if not docs:
            return losses
        layers, bilm_backprop = self.compute_layers(docs, is_train=True)
        frozen = settings(self.model)["frozen"]
        accumulated: List[Optional[List[Floats3d]]] = [None]

        def accumulate_gradient(d_layers: List[Floats3d]) -> None:
            if frozen:
                return
            if accumulated[0] is None:
                accumulated[0] = [d.copy() for d in d_layers]
            else:
                for total, d in zip(accumulated[0], d_layers):
                    total += d

        def backprop(d_layers: List[Floats3d]) -> List[Doc]:
            accumulate_gradient(d_layers)
            if not frozen:
                bilm_backprop(accumulated[0])
                if sgd is not None:
                    self.finish_update(sgd)
            return []

        batch_id = ElmoListener.get_batch_id(docs)
        for listener in self.listeners[:-1]:
            listener.receive(batch_id, layers, accumulate_gradient)
        if self.listeners:
            self.listeners[-1].receive(batch_id, layers, backprop)
        return losses

    def get_loss(self, examples, scores) -> None:
        return None

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        cache_dir: Optional[str] = None,
        cache_memory_mb: Optional[float] = None,
        cache_dtype: Optional[str] = None,
    ) -> None:
        """Load the biLM files and size the scheme (checking its layers against the biLM's).

        cache_dir, cache_memory_mb, cache_dtype: a layer cache for this process only (training:
            ``[initialize.components.elmo]``), not saved with the pipeline; None: not given. Their
            meaning is that of the ``BiLM.v3`` settings of the same names; a model with a cache of
            its own takes no different value here (see :func:`process_cache_settings`).
        Listeners check their own schemes when their components initialize.
        """
        validate_get_examples(get_examples, "Elmo.initialize")
        given = {"cache_dir": cache_dir, "cache_memory_mb": cache_memory_mb, "cache_dtype": cache_dtype}
        use_cache(self.model, **process_cache_settings(self.name, self._own_cache, given))
        self.model.initialize()
        self.scheme.initialize(X=[self.layer_sample()])

    def layer_sample(self):
        """Zero layers ``[n_layers, 1, width]`` of the loaded biLM: what schemes are sized with."""
        return self.model.ops.alloc3f(self.model.attrs["n_layers"], 1, self.model.get_dim("nO"))

    def add_label(self, label: str) -> int:
        raise NotImplementedError("The elmo component has no labels")

    # -- serialization: the biLM (with its weights) and the scheme --------------------------------
    def _serializers(self, exclude) -> Dict[str, tuple]:
        return {
            "cfg": (lambda: srsly.json_dumps(self.cfg).encode("utf8"), lambda b: self.cfg.update(srsly.json_loads(b))),
            "vocab": (
                lambda: self.vocab.to_bytes(exclude=exclude),
                lambda b: self.vocab.from_bytes(b, exclude=exclude),
            ),
            "model": (self.model.to_bytes, self.model.from_bytes),
            "scheme": (self.scheme.to_bytes, self.scheme.from_bytes),
        }

    def to_bytes(self, *, exclude=tuple()) -> bytes:
        return util.to_bytes({k: save for k, (save, _) in self._serializers(exclude).items()}, exclude)

    def from_bytes(self, bytes_data: bytes, *, exclude=tuple()) -> "Elmo":
        loaders = {
            k: _checked(load, f"the serialized elmo component ({k})")
            for k, (_, load) in self._serializers(exclude).items()
        }
        _checked(lambda b: util.from_bytes(b, loaders, exclude), "the serialized elmo component")(bytes_data)
        return self

    def to_disk(self, path, *, exclude=tuple()) -> None:
        serializers = self._serializers(exclude)
        util.to_disk(path, {k: _writer(save) for k, (save, _) in serializers.items()}, exclude)

    def from_disk(self, path, *, exclude=tuple()) -> "Elmo":
        """Load what ``to_disk`` wrote; a missing, empty or damaged file raises
        :class:`~spacy_elmo_mix.errors.ElmoFileError` naming it (the biLM's weights carry a checksum)."""
        serializers = self._serializers(exclude)
        util.from_disk(path, {k: _reader(load) for k, (_, load) in serializers.items()}, exclude)
        return self


def process_cache_settings(name: str, own: Dict[str, Any], given: Dict[str, Any]) -> Dict[str, Any]:
    """The layer cache settings (``CACHE_SETTINGS``) this process uses.

    name: the component's name (for the config sections in the error message).
    own: the model's settings, ``[components.<name>.model]``: the pipeline's own cache, used wherever
        it is loaded; it has none without a ``cache_dir`` and with ``cache_memory_mb = 0``.
    given: those of ``[initialize.components.<name>]``, for this process only; None: not given.
    Without a cache of the model's own, the given settings make this process's cache (those not
    given: the model's values). With one, they must be null or equal to the model's: a different
    value raises ElmoConfigError naming both (one of them would otherwise be ignored).
    """
    given = {key: str(value) if key == "cache_dir" else value for key, value in given.items() if value is not None}
    if own["cache_dir"] is None and not own["cache_memory_mb"]:
        return {**own, **given}
    conflicts = [key for key, value in given.items() if value != own[key]]
    if conflicts:
        model = ", ".join(f"{key} = {own[key]!r}" for key in conflicts)
        init = ", ".join(f"{key} = {given[key]!r}" for key in conflicts)
        raise ElmoConfigError(
            f"the layer cache is set twice: [components.{name}.model] {model} but [initialize.components.{name}] "
            f"{init}; set it in one place: the model's cache is the pipeline's own (saved with its config), "
            f"the initialize one serves this process only (null there, or no cache_dir and cache_memory_mb = 0 "
            f"in the model)"
        )
    return dict(own)


def _writer(save: Callable[[], bytes]) -> Callable:
    return lambda p: write_bytes_atomic(p, save())


def _reader(load: Callable[[bytes], object]) -> Callable:
    def read(path) -> None:
        path = Path(path)
        if not path.is_file():
            raise ElmoFileError(f"{path} is missing: the saved elmo component is incomplete")
        data = path.read_bytes()
        if not data:
            raise ElmoFileError(f"{path} is empty: the saved elmo component is damaged")
        _checked(load, str(path))(data)

    return read


def _checked(load: Callable[[bytes], object], where: str) -> Callable[[bytes], object]:
    """``load``, turning any failure on damaged data into an ElmoFileError naming ``where``."""

    def run(data: bytes):
        try:
            return load(data)
        except ElmoFileError as exc:
            if where in str(exc):
                raise
            raise ElmoFileError(f"{where}: {exc}") from exc
        except Exception as exc:
            raise ElmoFileError(
                f"{where} is damaged or not a saved elmo component ({type(exc).__name__}: {exc})"
            ) from exc

    return run
