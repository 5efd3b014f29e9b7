"""``spacy-elmo-mix.textcat_scorer.v1``: spaCy's scores of an exclusive ``textcat`` plus accuracy.

spaCy's textcat scorer reports macro-averaged F (``cats_score``) and per-class figures; sentence
classification results (SST-5 and the paper's lower half among them) are reported as accuracy: the
share of docs whose highest-scoring class is their gold class. This scorer adds it as ``cats_acc``
(a fraction, like spaCy's scores), so ``spacy train`` can select on it, and makes it the textcat's
main score (``cats_score``, described by ``cats_score_desc`` as ``accuracy``), which is the textcat
figure ``spacy evaluate`` prints; the macro F stays in ``cats_macro_f``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Optional

from spacy.scorer import Scorer
from spacy.training import Example
from spacy.util import registry


def textcat_accuracy(examples: Iterable[Example]) -> Optional[float]:
    """The share of examples whose predicted doc's highest ``cats`` score is the reference's class.

    examples: the predicted and gold docs. An example counts when its reference has exactly one
    class at 1.0 (an exclusive label; others are left out, as spaCy leaves out docs without gold
    cats); a prediction without scores is wrong. Ties go to the first class in the reference's
    order. None when no example counts.
    """
    right = counted = 0
    for example in examples:
        gold = [label for label, value in example.reference.cats.items() if value == 1.0]
        if len(gold) != 1:
            continue
        scores = example.predicted.cats
        counted += 1
        if scores:
            best = max(example.reference.cats, key=lambda label: scores.get(label, float("-inf")))
            right += best == gold[0] and gold[0] in scores
    return right / counted if counted else None


def score_textcat_with_accuracy(examples: Iterable[Example], **kwargs: Any) -> Dict[str, Any]:
    """spaCy's exclusive-class textcat scores (``Scorer.score_cats``) with accuracy as ``cats_acc``
    and as the main score ``cats_score`` (spaCy's own stays when no example has one gold class)."""
    examples = list(examples)
    scores = Scorer.score_cats(examples, "cats", multi_label=False, **kwargs)
    accuracy = textcat_accuracy(examples)
    scores["cats_acc"] = accuracy
    if accuracy is not None:
        scores.update(cats_score=accuracy, cats_score_desc="accuracy")
    return scores


@registry.scorers("spacy-elmo-mix.textcat_scorer.v1")
def build_textcat_scorer_v1() -> Callable[..., Dict[str, Any]]:
    """The scorer of an exclusive-class ``textcat``: spaCy's scores plus ``cats_acc`` (accuracy)."""
    return score_textcat_with_accuracy
