"""CRF sequence labellers trained by ``spacy train``: ``crf_ner`` (writes ``doc.ents``; NER and
chunking) and ``crf_tagger`` (writes ``token.tag_``; POS).

Both learn a linear-chain CRF (``tagging.crf``) over per-token scores from any tok2vec (by default
the paper's network: an ELMo listener, a 2 x 100 BiLSTM, see ``spacy-elmo-mix.BiLSTMTok2Vec.v1``).
``crf_ner`` labels spans in BIO or BILOU tags (``tag_scheme``) and decodes under the scheme's
constraints, so every decoded sequence spells well-formed entities. Gold tags come from the
reference docs aligned to the predicted tokens; a token without an aligned gold tag counts as
unknown (the likelihood sums over its tags), and a sentence whose known tags no valid sequence
matches (possible only with misaligned tokens) is left out of the loss.
"""

from itertools import islice
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Union, cast

import numpy as np
import srsly
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc, Span
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.vocab import Vocab
from thinc.api import Config, Model, Optimizer, set_dropout_rate
from thinc.types import Floats2d, Ints1d

from .errors import ElmoConfigError, ElmoFileError
from .layers.crf_layer import check_loaded, crf_decode, crf_loss
from .tagging.crf import UNKNOWN
from .tagging.tag_schemes import OUTSIDE, check_scheme, spans_to_tags, tag_names, tags_to_spans

ENTS, TAGS = "ents", "tags"
DEFAULT_MODEL_STR = """
[model]
@architectures = "spacy-elmo-mix.CRFTagger.v1"
nO = null

[model.tok2vec]
@architectures = "spacy-elmo-mix.BiLSTMTok2Vec.v1"
width = 100
depth = 2
dropout = 0.5
recurrent_dropout = 0.5
embed = null

[model.tok2vec.elmo]
@architectures = "spacy-elmo-mix.ElmoListener.v1"
upstream = "*"

[model.tok2vec.elmo.mixer]
@layers = "spacy-elmo-mix.PaperScheme.v1"
name = "weighted"
"""
DEFAULT_MODEL = Config().from_str(DEFAULT_MODEL_STR)["model"]
# spaCy's BILUO tags of aligned entities, in each scheme the CRF labels in.
_FROM_BILUO = {"BIO": {"B": "B", "I": "I", "L": "I", "U": "B"}, "BILOU": {"B": "B", "I": "I", "L": "L", "U": "U"}}
_IOB_MISSING, _IOB_O = 0, 2  # token.ent_iob: 0 missing, 1 I, 2 O, 3 B


def _same_tokens(predicted: Doc, reference: Doc) -> bool:
    """Whether two docs of one example have the same tokens: the same token texts (``ORTH``, their
    ids in the shared string store) each followed by the same whitespace (``SPACY``), hence the same
    text and token offsets. Read as two arrays, without building the docs' texts."""
    attrs: List[Union[int, str]] = ["ORTH", "SPACY"]
    return len(predicted) == len(reference) and np.array_equal(predicted.to_array(attrs), reference.to_array(attrs))


@Language.factory(
    "crf_ner",
    assigns=["doc.ents", "token.ent_iob", "token.ent_type"],
    default_config={
        "model": DEFAULT_MODEL,
        "tag_scheme": "BIO",
        "incorrect_spans_key": None,
        "scorer": {"@scorers": "spacy.ner_scorer.v1"},
    },
    default_score_weights={"ents_f": 1.0, "ents_p": 0.0, "ents_r": 0.0, "ents_per_type": None},
)
def make_crf_ner(
    nlp: Language,
    name: str,
    model: Model,
    tag_scheme: str,
    incorrect_spans_key: Optional[str],
    scorer: Optional[Callable],
) -> "CRFTagger":
    """A CRF entity (or chunk) recognizer. Entities a doc already has (an ``entity_ruler``
    before it) are kept, as spaCy's ``ner`` keeps them, and the CRF labels the rest around them.

    model: emissions per token (``spacy-elmo-mix.CRFTagger.v1``). tag_scheme: ``BIO`` (as the paper)
    or ``BILOU``. incorrect_spans_key: as spaCy's ``ner``: the key of a span group of the training
    docs (``doc.spans[key]``) whose spans are known not to be entities of their label; training
    then counts no sequence that starts such an entity there (BIO: ``B-label`` at its start;
    BILOU: ``U-`` of a one-token span, else ``B-`` at its start and ``L-`` at its end).
    scorer: ``spacy.ner_scorer.v1`` (``ents_f``, ``ents_p``, ``ents_r``).
    """
    if tag_scheme not in _FROM_BILUO:
        raise ElmoConfigError(f"crf_ner: tag_scheme must be one of {', '.join(_FROM_BILUO)}, got {tag_scheme!r}")
    if incorrect_spans_key is not None and (not isinstance(incorrect_spans_key, str) or not incorrect_spans_key):
        raise ElmoConfigError(
            f"crf_ner: incorrect_spans_key must be a span group name or null, got {incorrect_spans_key!r}"
        )
    return CRFTagger(
        nlp.vocab,
        model,
        name,
        target=ENTS,
        tag_scheme=tag_scheme,
        scorer=scorer,
        incorrect_spans_key=incorrect_spans_key,
    )


@Language.factory(
    "crf_tagger",
    assigns=["token.tag"],
    default_config={"model": DEFAULT_MODEL, "overwrite": False, "scorer": {"@scorers": "spacy.tagger_scorer.v1"}},
    default_score_weights={"tag_acc": 1.0},
)
def make_crf_tagger(nlp: Language, name: str, model: Model, overwrite: bool, scorer: Optional[Callable]) -> "CRFTagger":
    """A CRF token tagger (all tag transitions allowed and learned).

    model: emissions per token (``spacy-elmo-mix.CRFTagger.v1``). overwrite: replace tags that
    tokens already have (False, as spaCy's ``tagger``: such a token keeps its tag, and the others
    are decoded around it, as the best sequence through the kept tags the CRF knows).
    scorer: ``spacy.tagger_scorer.v1`` (``tag_acc``).
    """
    if not isinstance(overwrite, bool):
        raise ElmoConfigError(f"crf_tagger: overwrite must be true or false, got {overwrite!r}")
    return CRFTagger(nlp.vocab, model, name, target=TAGS, tag_scheme="tags", scorer=scorer, overwrite=overwrite)


class CRFTagger(TrainablePipe):
    """A pipeline component that labels tokens with a CRF: the class of ``crf_ner`` and ``crf_tagger``.

    vocab: the pipeline's vocab. model: docs -> emissions (``CRFTaggerModel``). name: the component's
    name. target: ``ents`` (spans in ``doc.ents``) or ``tags`` (``token.tag_``). tag_scheme: ``BIO`` or
    ``BILOU`` for ``ents``, ``tags`` for ``tags``. scorer: the scoring function. overwrite (tags
    only): replace tags tokens already have. incorrect_spans_key (ents only): the span group of
    training docs whose spans are known not to be entities of their label (:func:`make_crf_ner`).
    """

    def __init__(
        self,
        vocab: Vocab,
        model: Model,
        name: str,
        *,
        target: str,
        tag_scheme: str,
        scorer: Optional[Callable],
        overwrite: bool = False,
        incorrect_spans_key: Optional[str] = None,
    ) -> None:
        if target not in (ENTS, TAGS) or (target == TAGS) != (check_scheme(tag_scheme) == "tags"):
            raise ElmoConfigError(
                f"target {target!r} with tag scheme {tag_scheme!r}: ents take BIO or BILOU, tags take 'tags'"
            )
        self.vocab = vocab
        self.model = model
        self.name = name
        self.scorer = scorer
        self.cfg: Dict[str, Any] = {"labels": [], "target": target, "tag_scheme": tag_scheme}
        self._made_as = (target, tag_scheme)  # what the factory's settings ask for
        self.overwrite = overwrite
        self.incorrect_spans_key = incorrect_spans_key

    @property
    def labels(self) -> tuple:
        return tuple(self.cfg["labels"])

    @property
    def tag_names(self) -> List[str]:
        """The CRF's tags, in the order of its scores."""
        return tag_names(self.labels, self.cfg["tag_scheme"])

    def _tag_index(self) -> Dict[str, int]:
        """Each tag's index among the CRF's scores (:attr:`tag_names`)."""
        return {name: i for i, name in enumerate(self.tag_names)}

    @property
    def label_data(self) -> List[str]:
        return list(self.labels)

    def add_label(self, label: str) -> int:
        if not isinstance(label, str) or not label:
            raise ElmoConfigError(f"{self.name}: a label must be a non-empty string, got {label!r}")
        if label in self.cfg["labels"]:
            return 0
        if self.model.has_dim("nO") is True:
            raise ElmoConfigError(f"{self.name}: cannot add label {label!r} after initialize; add all labels first")
        self.cfg["labels"].append(label)
        self.vocab.strings.add(label)
        return 1

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        labels: Optional[List[str]] = None,
    ) -> None:
        """Collect the labels (or take ``labels``) and size the model: emissions, CRF and constraints."""
        validate_get_examples(get_examples, f"{type(self).__name__}.initialize")
        for label in labels if labels is not None else self._labels_in(get_examples()):
            self.add_label(label)
        if not self.labels:
            raise ElmoConfigError(f"{self.name}: no labels found in the training data; nothing to learn")
        docs = [eg.predicted for eg in islice(get_examples(), 10)]
        self.model.initialize(X=docs, Y=(self.tag_names, self.cfg["tag_scheme"]))

    def _labels_in(self, examples: Iterable[Example]) -> List[str]:
        found: Set[str] = set()
        for eg in examples:
            if self.cfg["target"] == ENTS:
                found.update(ent.label_ for ent in eg.reference.ents)
            else:
                found.update(token.tag_ for token in eg.reference if token.tag_)
        return sorted(found)

    def from_disk(self, path: Union[str, Path], *, exclude=tuple()) -> "CRFTagger":
        """Load as spaCy's components do, then check what was read (:meth:`_check_loaded`); a
        missing, empty, truncated or damaged ``cfg`` or ``model`` raises ElmoFileError naming it."""
        path = Path(path)
        for name in ("cfg", "model"):
            file = path / name
            if name not in exclude and (not file.is_file() or file.stat().st_size == 0):
                raise ElmoFileError(f"{file}: missing or empty (a damaged {self.name} component)")
        if "cfg" not in exclude:  # read here, as spaCy's components do, to name the file if it is damaged
            try:
                self.cfg.update(srsly.read_json(path / "cfg"))
            except ValueError as exc:
                raise ElmoFileError(f"{path / 'cfg'}: not a valid {self.name} settings file ({exc})") from None
        try:
            super().from_disk(path, exclude=[*exclude, "cfg"])
        except Exception as exc:  # msgpack's, torch's state_dict errors: the model file is damaged
            raise ElmoFileError(f"{path / 'model'}: cannot be loaded ({_first_line(exc)})") from None
        self._check_loaded(str(path))
        return self

    def from_bytes(self, bytes_data: bytes, *, exclude=tuple()) -> "CRFTagger":
        """Load as spaCy's components do, then check what was read (:meth:`_check_loaded`)."""
        try:
            super().from_bytes(bytes_data, exclude=exclude)
        except Exception as exc:
            raise ElmoFileError(f"the {self.name} component's bytes cannot be loaded ({_first_line(exc)})") from None
        self._check_loaded(f"the {self.name} component's bytes")
        return self

    def _check_loaded(self, where: str) -> None:
        """The loaded settings fit this component (target, tag scheme, distinct labels) and the CRF
        fits its labels (``check_loaded``: sizes, finite scores, constraints derived anew)."""
        cfg = self.cfg
        labels = cfg.get("labels")
        if (
            not isinstance(labels, list)
            or not all(isinstance(x, str) and x for x in labels)
            or len(set(labels)) != len(labels)
        ):
            raise ElmoFileError(f"{where}: the labels must be distinct non-empty strings, got {labels!r}")
        scheme, target = cfg.get("tag_scheme"), cfg.get("target")
        if (target, scheme) != self._made_as:
            raise ElmoFileError(
                f"{where}: saved for target {target!r} and tag scheme {scheme!r}, but the component's "
                f"settings give {self._made_as[0]!r} and {self._made_as[1]!r}"
            )
        assert scheme is not None  # equal to self._made_as[1]
        check_loaded(self.model.get_ref("crf"), self.tag_names, scheme, where)

    def predict(self, docs: Iterable[Doc]) -> List[Ints1d]:
        """The best valid tag indices of each doc, through what the docs already have: entities
        (``crf_ner``; always kept, as spaCy's ``ner`` keeps them) or tags (``crf_tagger`` unless
        ``overwrite``)."""
        docs = list(docs)
        allowed = [self._kept(doc) for doc in docs]
        return crf_decode(self.model.get_ref("crf"), self.model.predict(docs), allowed)

    def _kept(self, doc: Doc) -> Optional[np.ndarray]:
        """The tags each token may take given the annotation ``doc`` already has ([n, T]), or None
        where it has none that binds. An entity of a label the CRF knows is decoded as itself (and
        not extended by an ``I-`` of its label); any other entity's tokens are ``O`` to the CRF and
        the entity is put back as it was. A tag the CRF knows is kept; other tags bind nothing."""
        target = self.cfg["target"]
        if (target == TAGS and (self.overwrite or not doc.has_annotation("TAG"))) or (target == ENTS and not doc.ents):
            return None  # nothing binds (every doc of an evaluation): no mask to build
        index = self._tag_index()
        allowed = np.ones((len(doc), len(index)), dtype=bool)
        if target == TAGS:
            for token in doc:
                if token.tag_ in index:
                    allowed[token.i] = False
                    allowed[token.i, index[token.tag_]] = True
            return allowed if not allowed.all() else None
        scheme = self.cfg["tag_scheme"]
        for ent in doc.ents:
            known = ent.label_ in self.labels
            tags = spans_to_tags([(0, len(ent), ent.label_)], len(ent), scheme) if known else [OUTSIDE] * len(ent)
            allowed[ent.start : ent.end] = False
            for i, tag in enumerate(tags, start=ent.start):
                allowed[i, index[tag]] = True
            if known and ent.end < len(doc) and scheme == "BIO":
                allowed[ent.end, index[f"I-{ent.label_}"]] = False
        return allowed if not allowed.all() else None

    def set_annotations(self, docs: Iterable[Doc], paths: List[Ints1d]) -> None:
        names = self.tag_names
        for doc, path in zip(docs, paths):
            tags = [names[int(i)] for i in path]
            if self.cfg["target"] == TAGS:
                for token, tag in zip(doc, tags):
                    if self.overwrite or not token.tag_:
                        token.tag_ = tag
            else:
                kept = {(ent.start, ent.end) for ent in doc.ents}
                found = [Span(doc, s, e, label=label) for s, e, label in tags_to_spans(tags) if (s, e) not in kept]
                doc.set_ents(list(doc.ents) + found, default="outside")

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Optimizer] = None,
        losses: Optional[dict] = None,
    ) -> dict:
        losses = {} if losses is None else losses
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        validate_examples(examples, f"{type(self).__name__}.update")
        if not any(len(eg.predicted) for eg in examples):
            return losses
        set_dropout_rate(self.model, drop)
        emissions, backprop = self.model.begin_update([eg.predicted for eg in examples])
        loss, d_emissions = self.get_loss(examples, emissions)
        backprop(d_emissions)
        if sgd not in (None, False):
            self.finish_update(sgd)
        losses[self.name] += loss
        return losses

    def get_loss(self, examples: Iterable[Example], emissions: List[Floats2d]):
        """The mean negative log-likelihood of the gold tags over the batch's docs, and its gradient."""
        gold = cast(List[Ints1d], [self._gold_indices(eg) for eg in examples])  # int32 arrays
        allowed = [self._not_incorrect(eg) for eg in examples] if self.incorrect_spans_key else None
        return crf_loss(self.model.get_ref("crf"), emissions, gold, allowed)

    def _not_incorrect(self, eg: Example) -> Optional[np.ndarray]:
        """The tags each predicted token may take given the reference's spans marked incorrect
        (``incorrect_spans_key``), or None where it marks none (see :func:`make_crf_ner`)."""
        spans = eg.reference.spans.get(self.incorrect_spans_key, [])
        index = self._tag_index()
        allowed = np.ones((len(eg.predicted), len(index)), dtype=bool)
        for span in eg.get_aligned_spans_y2x(spans, allow_overlap=True) if len(spans) else []:
            label, first, last = span.label_, span.start, span.end - 1
            if self.cfg["tag_scheme"] == "BILOU" and first == last:
                marks = [(first, f"U-{label}")]
            elif self.cfg["tag_scheme"] == "BILOU":
                marks = [(first, f"B-{label}"), (last, f"L-{label}")]
            else:
                marks = [(first, f"B-{label}")]
            for i, tag in marks:
                if tag in index:
                    allowed[i, index[tag]] = False
        return None if allowed.all() else allowed

    def _gold_indices(self, eg: Example) -> np.ndarray:
        """The gold tag index of each predicted token; -1 where unknown (no aligned or known tag).

        When both docs have the same tokens (given tokens, ``gold_preproc``: every example of the
        paper's protocol), the reference's own annotation is read directly, which is what spaCy's
        alignment (``get_aligned``, ``get_aligned_ner``) returns then, at a fraction of its cost.
        """
        if _same_tokens(eg.predicted, eg.reference):
            return self._gold_of(eg.reference)
        index = self._tag_index()
        if self.cfg["target"] == TAGS:
            tags = eg.get_aligned("TAG", as_string=True)
        else:
            tags = [self._from_biluo(tag) for tag in eg.get_aligned_ner()]
        return np.array([index.get(tag, UNKNOWN) if tag else UNKNOWN for tag in tags], dtype="int32")

    def _gold_of(self, doc: Doc) -> np.ndarray:
        """The gold tag indices of ``doc``'s own tokens, as :meth:`_gold_indices` defines them."""
        strings = doc.vocab.strings
        if self.cfg["target"] == TAGS:
            by_hash = {strings[name]: i for i, name in enumerate(self.tag_names)}
            return np.array([by_hash.get(int(h), UNKNOWN) for h in doc.to_array("TAG")], dtype="int32")
        gold = np.full(len(doc), UNKNOWN, dtype="int32")
        if not doc.has_annotation("ENT_IOB"):
            return gold
        index = self._tag_index()
        iob, space = doc.to_array(["ENT_IOB", "IS_SPACE"]).T
        # spaCy's rule: O where the reference says O, and on whitespace tokens without annotation
        gold[(iob == _IOB_O) | ((iob == _IOB_MISSING) & (space == 1))] = index[OUTSIDE]
        for ent in doc.ents:
            tags = spans_to_tags([(0, len(ent), ent.label_)], len(ent), self.cfg["tag_scheme"])
            gold[ent.start : ent.end] = [index.get(tag, UNKNOWN) for tag in tags]
        return gold

    def _from_biluo(self, tag: Optional[str]) -> Optional[str]:
        if tag in (None, "", "-"):
            return None
        if tag == "O":
            return tag
        return f"{_FROM_BILUO[self.cfg['tag_scheme']][tag[0]]}-{tag[2:]}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
