"""The paper's Table 1, as data: the reference row that ``compare`` prints under each of our rows.

Reimers & Gurevych (2019), "Alternative Weighting Schemes for ELMo Embeddings" (arXiv 1904.02954),
Table 1: mean test score (percent) over 10 seeds on the 5.5B ELMo model, one column per weighting
scheme; ``*`` marks a score significantly worse than the row's best (p < 0.01, as the paper tested).
The upper half is the authors' BiLSTM-CRF, the lower half AllenNLP's reference model of each task.
Rows are keyed by our data set ids; the paper has no no-ELMo ``baseline`` column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, Optional

SOURCE = (
    "Reimers & Gurevych 2019, Table 1 (arXiv 1904.02954): 5.5B ELMo, 10 seeds; the upper half is the "
    "authors' BiLSTM-CRF, the lower half (AllenNLP's model) AllenNLP's reference model of each task"
)
LABEL = "↳ paper (Reimers & Gurevych 2019)"
ALLENNLP_LABEL = "↳ paper, AllenNLP's model (Reimers & Gurevych 2019)"
# The paper's rows that have no row here, and why.
NOT_RUN = (
    "rows of the paper's Table 1 not run here: ACE 2005 entities and events, and PTB constituency "
    "parsing (LDC licences: the data are not available here); SNLI (sentence pairs: no pair classifier "
    "in this package); GENIA and AllenNLP GENIA (no copy of GENIA/JNLPBA here: `own` runs it from "
    "your copy); AllenNLP NER is CoNLL-2003 with AllenNLP's own tagger, not a network of this package"
)
# The paper's columns, in its order (our scheme ids).
COLUMNS = ("layer1", "layer2", "layer3", "concat", "average", "weighted", "weighted12")


@dataclass(frozen=True)
class PaperRow:
    """One row of the paper's Table 1.

    task: the paper's row name; scores: scheme -> mean test score in percent; worse: the schemes
    the paper marks ``*``; note: how the paper's data or network differ from ours ("" when they do
    not); allennlp: a row of the table's lower half (AllenNLP's model of the task, not the BiLSTM-CRF).
    """

    task: str
    scores: Dict[str, float]
    worse: FrozenSet[str]
    note: str = ""
    allennlp: bool = False

    @property
    def label(self) -> str:
        """The row's first cell: :data:`LABEL`, or :data:`ALLENNLP_LABEL` for the lower half."""
        return ALLENNLP_LABEL if self.allennlp else LABEL

    def cell(self, scheme: str) -> str:
        """The paper's text for ``scheme`` (``91.53*``), or ``–`` for a column the paper lacks."""
        if scheme not in self.scores:
            return "–"
        return f"{self.scores[scheme]:.2f}" + ("*" if scheme in self.worse else "")


def _row(task: str, cells: str, note: str = "", allennlp: bool = False) -> PaperRow:
    """A :class:`PaperRow` from the paper's cells in :data:`COLUMNS` order (``90.50* 91.78 ...``)."""
    if len(cells.split()) != len(COLUMNS):
        raise ValueError(f"{task}: {len(cells.split())} cells for the paper's {len(COLUMNS)} columns")
    texts = dict(zip(COLUMNS, cells.split()))
    return PaperRow(
        task,
        {scheme: float(text.rstrip("*")) for scheme, text in texts.items()},
        frozenset(scheme for scheme, text in texts.items() if text.endswith("*")),
        note,
        allennlp,
    )


PAPER_ROWS: Dict[str, PaperRow] = {
    "conll2003": _row("NER (CoNLL-2003)", "90.50* 91.78 91.53* 91.67 91.81 91.73 91.76"),
    "conll2000": _row("Chunking (CoNLL-2000)", "95.07* 96.55 96.14* 96.38* 96.34* 96.52 96.51"),
    "ud_ewt": _row(
        "POS (UD, 500 sent.)",
        "90.25* 92.33 90.46* 92.21 91.75* 91.94* 91.48*",
        "the paper used UD 1.3, we use UD EWT 2.16",
    ),
    "wnut16": _row("WNUT16", "44.83* 49.88 48.58* 49.53 48.72 49.56 49.90"),
    "arguments": _row(
        "Arguments",
        "56.89* 58.84 57.48 57.82 59.03 58.75 59.30",
        "span F1 of the three component types; the paper's essay split (402 / 80 / 80), ours as in ../shared/data",
    ),
    "sst5": _row(
        "AllenNLP SST-5",
        "51.76* 53.41 52.91 53.86 53.19 53.33 54.17",
        "AllenNLP's biattentive classification network; ours is the paper's BiLSTM with max and mean "
        "pooling and a softmax (configs/textcat.cfg): the same data and metric (accuracy), another network",
        allennlp=True,
    ),
    "ud_ewt_parse": _row(
        "AllenNLP Parsing",
        "92.51* 94.10* 93.84* 94.09* 93.94* 94.37 94.39",
        "AllenNLP's constituency parser on the Penn Treebank (F1); ours is dependency parsing of UD EWT "
        "(LAS, spaCy's transition-based parser on the paper's BiLSTM): another task, treebank and metric, "
        "so compare the ranking of the schemes only",
        allennlp=True,
    ),
}


def paper_row(dataset: str) -> Optional[PaperRow]:
    """The paper's row for our data set id ``dataset``; None for a data set the paper did not use."""
    return PAPER_ROWS.get(dataset)
