"""Compare the weighting schemes: the paper's Table 1 from a folder of evaluation results.

Result layout (written by the grid runner and the ``evaluate`` step, read here)::

    results/
      runs/{dataset}/{scheme}/seed{N}/
        metrics.json      the run's evaluation (below); its presence marks the run as finished
        log.txt           the run's captured stdout and stderr (the grid runner writes it)
      table.md            written by compare: mean ± std per dataset x scheme, best bold, † = worse
      scores.png          written by compare: score of every run, per scheme per dataset
      layer_weights.md    written by compare: learned s_j and gamma, averaged over seeds
      timing.md           written by compare: training time per scheme, ratio weighted12 / weighted

``metrics.json`` holds one JSON object with at least::

    {"dataset": "conll2003", "scheme": "weighted", "seed": 1,
     "score": 0.9123,                 # test F1 (NER, chunking) or accuracy (POS), a fraction in 0..1
     "metric": "ents_f",              # "ents_f", "tag_acc" or "pos_acc"
     "train_seconds": 812.5,          # training time (optional)
     "layer_weights": {               # optional; schemes with learned weights only
        "ner": {"weights": [0.2, 0.5, 0.3], "gamma": 1.7}}}   # component -> softmax-normalized s_j, gamma

``dataset``, ``scheme`` and ``seed`` must match the run's folder. Scheme ids, in the paper's column
order: ``layer1``, ``layer2``, ``layer3`` (the paper's 1./2./3. Layer: layer index 0/1/2), ``concat``,
``average``, ``weighted`` (Peters et al.: learned weighted average of all layers) and ``weighted12``
(learned weighted average of the 1st and 2nd layer); other scheme ids follow alphabetically.

Significance: within a row, each scheme is compared with the best one by Welch's t-test
(``scipy.stats.ttest_ind(equal_var=False)``, one-sided: the best is greater); p < ``alpha`` (0.01, as
in the paper) marks it with †. A comparison needs at least 2 seeds on both sides; otherwise the cell
is not marked and the table's notes say so. Missing or unreadable runs are listed in the notes (and
returned) instead of stopping the comparison. Every output is written atomically.
"""

from __future__ import annotations

import io
import json
import math
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..atomic import atomic_write, write_text_atomic
from ..errors import ElmoFileError, ElmoInputError
from .convert import load_datasets
from .grid import run_folders
from .identity import stale_reason
from .paper_table import LABEL as PAPER_LABEL
from .paper_table import SOURCE as PAPER_SOURCE
from .paper_table import paper_row
from .run import BASELINE

PathLike = Union[str, Path]
RunKey = Tuple[str, str, int]

SCHEMES = {
    "layer1": "1. Layer",
    "layer2": "2. Layer",
    "layer3": "3. Layer",
    "concat": "Concat",
    "average": "Average",
    "weighted": "Weighted (all)",
    "weighted12": "Weighted (1.&2.)",
}
# Row labels of the built-in data sets, in the paper's order (configs/datasets.json).
DATASETS = {name: spec.label or name for name, spec in load_datasets().items()}
METRICS = {"ents_f": "F1", "tag_acc": "accuracy", "pos_acc": "accuracy"}
REQUIRED = ("dataset", "scheme", "seed", "score", "metric")


# ----------------------------------------------------------------------------------------- loading


class MetricsError(ElmoFileError):
    """A metrics.json is unreadable or lacks a key; the message names the file and key."""


@dataclass
class Run:
    """One finished run, from its metrics.json.

    dataset/scheme/seed: the run's grid point; score: test score as a fraction; metric: its name;
    train_seconds: training time (None when not recorded); layer_weights: component ->
    (normalized weights, gamma), empty when not recorded; config: the training config's file name
    (None when not recorded); protocol: how it was trained and stopped, in words (:func:`protocol_of`);
    setup: everything that produced it except the seed (:func:`setup_of`); converged: whether it
    stopped by its own stopping rule (None: not recorded); finished: its metrics.json's mtime.
    """

    dataset: str
    scheme: str
    seed: int
    score: float
    metric: str
    train_seconds: Optional[float] = None
    layer_weights: Dict[str, Tuple[List[float], float]] = field(default_factory=dict)
    config: Optional[str] = None
    protocol: str = "unrecorded"
    setup: Dict[str, object] = field(default_factory=dict)
    converged: Optional[bool] = None
    finished: float = 0.0


@dataclass
class Results:
    """Everything read from a results folder.

    runs: the finished runs the table pools; missing: run key -> why it is missing (expected but
    absent or unreadable); excluded: run key -> why a finished run is not pooled (another protocol,
    or a setup that differs from its cell's by more than the seed); protocol: the one protocol of
    the pooled runs; notes: other problems (a mismatching key, bad layer weights), one line each.
    """

    runs: List[Run] = field(default_factory=list)
    missing: Dict[RunKey, str] = field(default_factory=dict)
    excluded: Dict[RunKey, str] = field(default_factory=dict)
    protocol: str = ""
    notes: List[str] = field(default_factory=list)


def _finite(value, key: str, path: Path) -> float:
    """``value`` as a finite float; MetricsError naming ``path`` and ``key`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise MetricsError(f"{path}: key {key!r} must be a finite number, found {value!r}")
    return float(value)


def read_metrics(path: PathLike, expected: RunKey) -> Tuple[Run, dict]:
    """Read one metrics.json's required keys as a :class:`Run`; also return the parsed object.

    path: the file; expected: (dataset, scheme, seed) of its folder, which the file must repeat.
    Raises MetricsError (naming file and key) when it is unreadable, lacks a key or disagrees.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MetricsError(f"{path}: unreadable ({exc})") from exc
    if not isinstance(data, dict):
        raise MetricsError(f"{path}: expected a JSON object")
    for key in REQUIRED:
        if key not in data:
            raise MetricsError(f"{path}: missing key {key!r}")
    for key, value in zip(("dataset", "scheme", "seed"), expected):
        if data[key] != value:
            raise MetricsError(f"{path}: key {key!r} is {data[key]!r} but the folder says {value!r}")
    score = _finite(data["score"], "score", path)
    if not 0.0 <= score <= 1.0:
        raise MetricsError(f"{path}: key 'score' must be a fraction in 0..1, found {score}")
    return Run(*expected, score, str(data["metric"])), data


def _layer_weights(data: dict, path: Path) -> Dict[str, Tuple[List[float], float]]:
    """The ``layer_weights`` of a metrics.json (empty when absent); MetricsError when malformed."""
    result = {}
    for component, entry in (data.get("layer_weights") or {}).items():
        key = f"layer_weights.{component}"
        if not isinstance(entry, dict) or not isinstance(entry.get("weights"), list) or not entry["weights"]:
            raise MetricsError(f"{path}: key {key!r} needs a non-empty list 'weights' and a number 'gamma'")
        weights = [_finite(w, f"{key}.weights", path) for w in entry["weights"]]
        if abs(sum(weights) - 1.0) > 1e-3:
            raise MetricsError(
                f"{path}: key {key}.weights must be softmax-normalized (sum 1), sums to {sum(weights):.4f}"
            )
        result[component] = (weights, _finite(entry.get("gamma"), f"{key}.gamma", path))
    return result


def add_extras(run: Run, data: dict, path: Path) -> Optional[str]:
    """Set the optional ``train_seconds``, ``layer_weights`` and ``config`` of ``run`` from ``data``.

    run: the run to complete; data: its metrics.json object; path: the file, for messages.
    Returns a note when one is malformed (that one is then left out, the score still counts).
    """
    run.protocol, run.setup = protocol_of(data), setup_of(data)
    run.finished = path.stat().st_mtime
    if isinstance(data.get("converged"), bool):
        run.converged = data["converged"]
    try:
        if data.get("train_seconds") is not None:
            run.train_seconds = _finite(data["train_seconds"], "train_seconds", path)
        run.layer_weights = _layer_weights(data, path)
        if data.get("config") is not None:
            run.config = str(data["config"])
    except MetricsError as exc:
        return f"{exc} (left out; the score still counts)"
    return None


def protocol_of(data: dict) -> str:
    """A run's training protocol in words, from its metrics.json ``data``: the recorded ``protocol``
    object (``key=value, ...``), else its fixed budget (``max_steps``), else ``unrecorded``."""
    protocol = data.get("protocol")
    if isinstance(protocol, dict) and protocol:
        return ", ".join(f"{k}={v}" for k, v in protocol.items())
    if isinstance(data.get("max_steps"), int) and data["max_steps"] > 0:
        return f"fixed budget, max_steps={data['max_steps']}"
    return "unrecorded"


def setup_of(data: dict) -> Dict[str, object]:
    """Everything that produced a run except its seed: the identity's settings without
    ``system.seed`` and the content digests of the files it read (their paths may differ between
    machines), or, for a run without an identity, its protocol and config."""
    identity = data.get("identity")
    if isinstance(identity, dict) and isinstance(identity.get("settings"), dict):
        setup = {k: v for k, v in identity["settings"].items() if k != "system.seed"}
        setup["input files (sha256)"] = sorted(str(d) for d in (identity.get("files") or {}).values())
        return setup
    return {"protocol": protocol_of(data), "config": data.get("config")}


def load_results(
    results_dir: PathLike,
    datasets: Optional[Sequence[str]] = None,
    schemes: Optional[Sequence[str]] = None,
    seeds: Optional[Sequence[int]] = None,
) -> Results:
    """Read every run under ``results_dir/runs`` and work out which expected runs are missing.

    results_dir: the results folder; datasets/schemes/seeds: the grid to tabulate (each None: every
    value found in any run); runs outside it are not read. A run folder without a readable
    metrics.json, or whose recorded input files changed since it ran (``workflow.identity``), counts
    as missing; the finished runs are then pooled by :func:`pool_runs`. A missing folder raises
    ElmoFileError.
    """
    results, unchecked = Results(), 0
    if not Path(results_dir).is_dir():
        raise ElmoFileError(f"{results_dir}: no such results folder")
    selected = (set(datasets or ()), set(schemes or ()), {int(n) for n in seeds or ()})
    on_disk = {(job.dataset, job.scheme, job.seed): run_dir for job, run_dir in run_folders(results_dir)}
    found: Dict[RunKey, Path] = {
        key: run_dir
        for key, run_dir in on_disk.items()
        if all(not chosen or value in chosen for value, chosen in zip(key, selected))
    }
    check_selection(results_dir, on_disk, found, selected)
    for key, run_dir in found.items():
        metrics = run_dir / "metrics.json"
        if not metrics.exists():
            results.missing[key] = "no metrics.json (failed or unfinished: see log.txt)"
            continue
        try:
            run, data = read_metrics(metrics, key)
        except MetricsError as exc:
            results.missing[key] = str(exc)
            continue
        if "identity" not in data:
            unchecked += 1
        elif stale_reason(data["identity"]) is not None:
            results.missing[key] = f"out of date: {stale_reason(data['identity'])} since it ran (rerun the grid)"
            continue
        results.runs.append(run)
        note = add_extras(run, data, metrics)
        if note:
            results.notes.append(note)
    grid = [
        datasets or sorted({k[0] for k in found}),
        schemes or sorted({k[1] for k in found}),
        seeds or sorted({k[2] for k in found}),
    ]
    for key in ((d, s, n) for d in grid[0] for s in grid[1] for n in grid[2]):
        if key not in found:
            results.missing[key] = "not run (no run folder)"
    if unchecked:
        results.notes.append(f"{unchecked} runs record no identity (inputs not checked: run by an older version)")
    return pool_runs(results)


def check_selection(
    results_dir: PathLike, on_disk: Dict[RunKey, Path], found: Dict[RunKey, Path], selected: Tuple[set, set, set]
) -> None:
    """Raise ElmoInputError for a selection that can only be a mistake: a dataset or scheme that is
    neither built in nor has a run folder (a typo), or a selection that matches no run folder at all
    while ``results_dir`` holds some. Values merely not run yet are left to the table's notes."""
    for flag, chosen, known, position in (
        ("--datasets", selected[0], set(DATASETS), 0),
        ("--schemes", selected[1], {*SCHEMES, BASELINE}, 1),
    ):
        present = {key[position] for key in on_disk}
        unknown = sorted(chosen - known - present)
        if unknown:
            raise ElmoInputError(
                f"{flag} {' '.join(unknown)}: neither built in nor run under {results_dir}/runs "
                f"(runs found: {', '.join(sorted(present)) or 'none'})"
            )
    if on_disk and not found:
        seeds = sorted({key[2] for key in on_disk})
        raise ElmoInputError(
            f"the selected datasets, schemes and seeds match no run folder under {results_dir}/runs "
            f"({len(on_disk)} there; seeds found: {', '.join(map(str, seeds))})"
        )


def pool_runs(results: Results) -> Results:
    """Keep the runs one table may average: one protocol, and per cell one setup up to the seed.

    The table's protocol is the one most runs share (ties: the most recently finished run's); a run
    under another is excluded. Within a cell (dataset x scheme) the runs are grouped by
    :func:`setup_of`; the largest group is kept (ties: the one with the most recent run), every
    other run is excluded with the settings in which it differs. Excluded runs are listed, never
    averaged in.
    """
    if not results.runs:
        return results
    votes: Dict[str, Tuple[int, float]] = {}
    for run in results.runs:
        count, newest = votes.get(run.protocol, (0, 0.0))
        votes[run.protocol] = (count + 1, max(newest, run.finished))
    results.protocol = max(votes, key=lambda p: votes[p])
    cells: Dict[Tuple[str, str], Dict[str, List[Run]]] = defaultdict(lambda: defaultdict(list))
    for run in results.runs:
        if run.protocol != results.protocol:
            results.excluded[run.dataset, run.scheme, run.seed] = f"another protocol ({run.protocol})"
        else:
            cells[run.dataset, run.scheme][json.dumps(run.setup, sort_keys=True, default=str)].append(run)
    results.runs = []
    for groups in cells.values():
        ranked = sorted(groups.values(), key=lambda g: (len(g), max(r.finished for r in g)), reverse=True)
        results.runs += ranked[0]
        for group in ranked[1:]:
            differs = _differences(group[0].setup, ranked[0][0].setup)
            for run in group:
                results.excluded[run.dataset, run.scheme, run.seed] = (
                    f"its setup differs from the cell's other {len(ranked[0])} runs in {differs}"
                )
    return results


def _differences(setup: Dict[str, object], other: Dict[str, object], most: int = 3) -> str:
    """The keys in which two setups differ, with both values: ``training.max_steps (400, not 300)``."""
    keys = sorted(k for k in set(setup) | set(other) if setup.get(k) != other.get(k))
    shown = [
        k if k == "input files (sha256)" else f"{k} ({setup.get(k, 'unset')}, not {other.get(k, 'unset')})"
        for k in keys[:most]
    ]
    return ", ".join(shown) + (f" and {len(keys) - most} more" if len(keys) > most else "")


# --------------------------------------------------------------------------------------- statistics


@dataclass
class Cell:
    """The runs of one dataset x scheme.

    scores: test scores (fractions) of its seeds; best: bold (the row's best mean); worse: † (worse
    than the best at p < alpha); p_value: of the test against the best (None: not tested).
    """

    scores: List[float]
    best: bool = False
    worse: bool = False
    p_value: Optional[float] = None

    @property
    def mean(self) -> float:
        return float(np.mean(self.scores))

    @property
    def std(self) -> float:
        """Sample standard deviation (ddof=1); NaN with fewer than 2 seeds."""
        return float(np.std(self.scores, ddof=1)) if len(self.scores) > 1 else math.nan


def welch_p_value(best: Sequence[float], other: Sequence[float]) -> Optional[float]:
    """One-sided Welch's t-test p-value that ``best`` has the greater mean; None when not testable.

    best/other: the two samples; fewer than 2 values on either side, or zero variance on both sides
    with equal means (a NaN from scipy), is not testable.
    """
    from scipy.stats import ttest_ind

    if len(best) < 2 or len(other) < 2:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # nearly constant samples: scipy warns, still answers
        p_value = float(ttest_ind(best, other, equal_var=False, alternative="greater").pvalue)
    return None if math.isnan(p_value) else p_value


def mark_row(cells: Dict[str, Cell], alpha: float) -> List[str]:
    """Set ``best``, ``worse`` and ``p_value`` on the cells of one row; return the untested schemes.

    cells: scheme -> cell, in column order (empty cells left out); alpha: the significance level.
    The reference is the first scheme with the highest mean; every scheme with that mean is bold.
    """
    top = max(cell.mean for cell in cells.values())
    reference = next(cell for cell in cells.values() if cell.mean == top)
    untested = []
    for scheme, cell in cells.items():
        cell.best = cell.mean == top
        if cell.best:
            continue
        cell.p_value = welch_p_value(reference.scores, cell.scores)
        cell.worse = cell.p_value is not None and cell.p_value < alpha
        if cell.p_value is None:
            untested.append(scheme)
    return untested


def scheme_order(schemes: Iterable[str]) -> List[str]:
    """The paper's column order for ``schemes``; unknown scheme ids after them, alphabetically."""
    schemes = set(schemes)
    return [s for s in SCHEMES if s in schemes] + sorted(schemes - set(SCHEMES))


def dataset_order(datasets: Iterable[str]) -> List[str]:
    """Known datasets in :data:`DATASETS` order, then the others alphabetically."""
    datasets = set(datasets)
    return [d for d in DATASETS if d in datasets] + sorted(datasets - set(DATASETS))


# ----------------------------------------------------------------------------------------- tables


@dataclass
class Table:
    """The analysed grid: rows (datasets) x columns (schemes) of cells, with notes for the footer.

    datasets/schemes: row and column order; cells: (dataset, scheme) -> Cell (absent: no run);
    metrics: dataset -> metric name(s); untested: (dataset, scheme) pairs not tested for significance;
    converged: dataset -> (runs that stopped by their stopping rule, runs that record whether they did).
    """

    datasets: List[str]
    schemes: List[str]
    cells: Dict[Tuple[str, str], Cell]
    metrics: Dict[str, List[str]]
    untested: List[Tuple[str, str]]
    converged: Dict[str, Tuple[int, int]] = field(default_factory=dict)


def build_table(results: Results, alpha: float) -> Table:
    """Group ``results.runs`` into cells and mark each row (see :func:`mark_row`).

    results: the loaded results (missing runs widen the grid so that they show as empty cells);
    alpha: the significance level.
    """
    keys = [(r.dataset, r.scheme) for r in results.runs] + [k[:2] for k in results.missing]
    datasets, schemes = dataset_order(k[0] for k in keys), scheme_order(k[1] for k in keys)
    cells: Dict[Tuple[str, str], Cell] = {}
    metrics: Dict[str, set] = defaultdict(set)
    converged: Dict[str, Tuple[int, int]] = {}
    for run in sorted(results.runs, key=lambda r: r.seed):
        cells.setdefault((run.dataset, run.scheme), Cell([])).scores.append(run.score)
        metrics[run.dataset].add(run.metric)
        if run.converged is not None:
            done, known = converged.get(run.dataset, (0, 0))
            converged[run.dataset] = (done + run.converged, known + 1)
    untested = []
    for dataset in datasets:
        row = {s: cells[dataset, s] for s in schemes if (dataset, s) in cells}
        if row:
            untested += [(dataset, s) for s in mark_row(row, alpha)]
    return Table(datasets, schemes, cells, {d: sorted(m) for d, m in metrics.items()}, untested, converged)


def _percent(cell: Cell, show_n: bool) -> str:
    """``mean ± std`` in percent with 2 decimals, bold/† marks, and ``(n=K)`` when ``show_n``."""
    std = "n/a" if math.isnan(cell.std) else f"{100 * cell.std:.2f}"
    text = f"{100 * cell.mean:.2f} ± {std}"
    text = f"**{text}**" if cell.best else text + ("†" if cell.worse else "")
    return text + (f" (n={len(cell.scores)})" if show_n else "")


def _row_label(table: Table, dataset: str) -> str:
    metric = ", ".join(METRICS.get(m, m) for m in table.metrics.get(dataset, []))
    name = DATASETS.get(dataset, dataset)
    return f"{name} (`{dataset}`{', ' + metric if metric else ''})"


def _markdown_table(header: List[str], rows: List[List[str]]) -> str:
    """A Markdown table; header: column titles; rows: cell texts (first column left-aligned)."""
    lines = ["| " + " | ".join(header) + " |", "|---" + "|---:" * (len(header) - 1) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def _scheme_title(scheme: str) -> str:
    return f"{SCHEMES[scheme]} `{scheme}`" if scheme in SCHEMES else f"`{scheme}`"


def _missing_notes(missing: Dict[RunKey, str], what: str = "missing") -> List[str]:
    """One line per data set, reason and set of seeds, naming the schemes concerned, each line
    starting ``what``: ``missing conll2003/{average, weighted}, seeds 2-10: not run (no run folder)``."""
    seeds: Dict[Tuple[str, str, str], List[int]] = defaultdict(list)
    for (dataset, scheme, seed), reason in sorted(missing.items()):
        seeds[dataset, scheme, reason].append(seed)
    schemes: Dict[Tuple[str, str, Tuple[int, ...]], List[str]] = defaultdict(list)
    for (dataset, scheme, reason), numbers in seeds.items():
        schemes[dataset, reason, tuple(numbers)].append(scheme)
    return [
        f"{what} {_cells(d, names)}, seed{'s' if len(numbers) > 1 else ''} {_seed_ranges(numbers)}: {reason}"
        for (d, reason, numbers), names in schemes.items()
    ]


def _cells(dataset: str, schemes: Iterable[str]) -> str:
    """``dataset/scheme``, or ``dataset/{a, b}`` for several schemes (in the paper's order)."""
    names = scheme_order(schemes)
    return f"{dataset}/{names[0]}" if len(names) == 1 else f"{dataset}/{{{', '.join(names)}}}"


def _seed_ranges(seeds: Sequence[int]) -> str:
    """Sorted seeds with runs of three or more consecutive ones as ranges: ``1, 2, 4-10``."""
    groups: List[List[int]] = []
    for seed in sorted(seeds):
        if groups and seed == groups[-1][-1] + 1:
            groups[-1].append(seed)
        else:
            groups.append([seed])
    return ", ".join(f"{group[0]}-{group[-1]}" if len(group) > 2 else ", ".join(map(str, group)) for group in groups)


def table_notes(table: Table, results: Results) -> List[str]:
    """The footnotes: untested comparisons, mixed metrics, missing runs and other problems."""
    untested: Dict[str, List[str]] = defaultdict(list)
    for dataset, scheme in table.untested:
        untested[dataset].append(scheme)
    notes = [
        f"{_cells(d, names)}: not tested for significance (fewer than 2 seeds here or in the row's best, "
        "or no variance)"
        for d, names in untested.items()
    ]
    notes += [f"{d}: runs report different metrics: {', '.join(m)}" for d, m in table.metrics.items() if len(m) > 1]
    excluded = _missing_notes(results.excluded, "not averaged in:")
    return notes + _config_notes(results) + _missing_notes(results.missing) + excluded + results.notes


def _config_notes(results: Results) -> List[str]:
    """One note naming each scheme's training config(s), when the runs recorded them."""
    configs: Dict[str, set] = {}
    for run in results.runs:
        if run.config is not None:
            configs.setdefault(run.scheme, set()).add(run.config)
    if not configs:
        return []
    shared: Dict[str, List[str]] = defaultdict(list)  # schemes with the same configs share a clause
    for scheme in scheme_order(configs):
        shared[", ".join(sorted(configs[scheme]))].append(f"`{scheme}`")
    return ["training configs: " + "; ".join(f"{', '.join(names)}: {files}" for files, names in shared.items())]


def _paper_cells(table: Table, dataset: str) -> Optional[List[str]]:
    """The paper's Table 1 row under ours (its cells in our column order), or None."""
    row = paper_row(dataset)
    if row is None:
        return None
    cells = [row.cell(s) for s in table.schemes] + (["–"] if table.converged else [])
    return [PAPER_LABEL] + cells


def _converged_cell(table: Table, dataset: str) -> List[str]:
    """``done/known`` runs converged in the row, when any run of the table records it."""
    if not table.converged:
        return []
    done, known = table.converged.get(dataset, (0, 0))
    return [f"{done}/{known}" if known else "–"]


def render_table(table: Table, results: Results, alpha: float) -> str:
    """``results/table.md``: caption (protocol, marks), the table with the paper's rows, numbered notes."""
    counts = sorted({len(c.scores) for c in table.cells.values()})
    show_n = len(counts) > 1
    seeds = (
        f"{counts[0]} seed{'s' if counts[0] != 1 else ''} per cell" if len(counts) == 1 else "n seeds (given per cell)"
    )
    caption = (
        f"Test score per dataset (row) and weighting scheme (column) in percent: mean ± sample standard "
        f"deviation (ddof=1) over {seeds}. **Bold**: the best mean of the row. †: significantly worse than "
        f"the row's best (Welch's t-test, one-sided, p < {alpha:g}). –: no finished run."
    )
    if results.protocol:
        caption += f"\n\nProtocol of every run in the table: {results.protocol}."
    if table.converged:
        caption += " *converged*: runs of the row that stopped by their stopping rule (the others hit the epoch limit)."
    rows = []
    for d in table.datasets:
        cells = [_percent(table.cells[d, s], show_n) if (d, s) in table.cells else "–" for s in table.schemes]
        rows.append([_row_label(table, d)] + cells + _converged_cell(table, d))
        paper = _paper_cells(table, d)
        if paper:
            rows.append(paper)
    header = ["Dataset"] + [_scheme_title(s) for s in table.schemes] + (["converged"] if table.converged else [])
    body = _markdown_table(header, rows) if rows else "(no results found)"
    notes = _paper_notes(table) + table_notes(table, results)
    footer = "\n".join(f"{i}. {note}" for i, note in enumerate(notes, start=1))
    return f"# Weighting schemes for ELMo: test scores\n\n{caption}\n\n{body}\n" + (
        f"\nNotes:\n\n{footer}\n" if notes else ""
    )


def _paper_notes(table: Table) -> List[str]:
    """What the paper's rows are, and how their data differ from ours, when the table has any."""
    rows = {d: paper_row(d) for d in table.datasets if paper_row(d)}
    if not rows:
        return []
    notes = [
        f"{PAPER_LABEL}: {PAPER_SOURCE}. Its `*` marks a score significantly worse than its row's best at "
        "p < 0.01 (the paper does not name its test). Its scores come from the 5.5B ELMo model; ours from "
        "the biLM our runs name in their identity: hold the ranking of the schemes against the paper's, "
        "not the absolute scores."
    ]
    return notes + [f"{PAPER_LABEL}, `{d}`: {row.note}" for d, row in rows.items() if row.note]


def _layer_indices(scheme: str, n_weights: int) -> List[int]:
    """The ELMo layer index of each of a scheme's ``n_weights`` weights: the paper schemes' own
    layers (``layer2`` -> [1], ``weighted12`` -> [0, 1]), else 0..n-1."""
    from ..layers.scalar_mix import PAPER_SCHEMES

    layers = (PAPER_SCHEMES.get(scheme) or {}).get("layers")
    return list(layers) if layers is not None and len(layers) == n_weights else list(range(n_weights))


def render_layer_weights(results: Results) -> str:
    """``results/layer_weights.md``: mean normalized s_j and gamma per dataset, scheme and component,
    each weight in the column of the ELMo layer it weighs."""
    groups: Dict[Tuple[str, str, str], List[Tuple[List[float], float]]] = defaultdict(list)
    for run in results.runs:
        for component, value in run.layer_weights.items():
            groups[run.dataset, run.scheme, component].append(value)
    schemes, datasets = scheme_order(k[1] for k in groups), dataset_order(k[0] for k in groups)
    placed = {key: _layer_indices(key[1], len(values[0][0])) for key, values in groups.items()}
    width = max((max(layers) + 1 for layers in placed.values() if layers), default=0)
    rows, notes = [], []
    for (dataset, scheme, component), values in sorted(
        groups.items(), key=lambda kv: (datasets.index(kv[0][0]), schemes.index(kv[0][1]), kv[0][2])
    ):
        lengths = {len(w) for w, _ in values}
        if len(lengths) > 1:
            notes.append(
                f"{dataset}/{scheme}/{component}: seeds disagree on the number of layers {sorted(lengths)}; left out"
            )
            continue
        mean = np.mean([w for w, _ in values], axis=0)
        cells = ["–"] * width
        for layer, weight in zip(placed[dataset, scheme, component], mean):
            cells[layer] = f"{weight:.3f}"
        gamma = np.mean([g for _, g in values])
        rows.append([f"`{dataset}`", f"`{scheme}`", component] + cells + [f"{gamma:.3f}", str(len(values))])
    header = ["Dataset", "Scheme", "Component"] + [f"s_{j}" for j in range(width)] + ["gamma", "seeds"]
    body = _markdown_table(header, rows) if rows else "(no run recorded layer weights)"
    text = (
        "# Learned layer weights\n\nSoftmax-normalized layer weights s_j, in the column of the layer j they "
        "weigh (0 = the char-CNN token layer, the paper's 1. layer; 1 and 2 = the LSTM layers), and the "
        "scale gamma, averaged over seeds; – : a layer the scheme does not use.\n\n" + body + "\n"
    )
    return text + "".join(f"\n- {note}" for note in notes) + ("\n" if notes else "")


def render_timing(results: Results) -> str:
    """``results/timing.md``: mean training seconds per dataset x scheme and weighted12 / weighted."""
    times: Dict[Tuple[str, str], List[float]] = defaultdict(list)
    for run in results.runs:
        if run.train_seconds is not None:
            times[run.dataset, run.scheme].append(run.train_seconds)
    datasets, schemes = dataset_order(k[0] for k in times), scheme_order(k[1] for k in times)

    def cell(dataset: str, scheme: str) -> str:
        values = times.get((dataset, scheme))
        return f"{np.mean(values):.1f} (n={len(values)})" if values else "–"

    def ratio(dataset: str) -> str:
        pair = times.get((dataset, "weighted12")), times.get((dataset, "weighted"))
        return f"{np.mean(pair[0]) / np.mean(pair[1]):.3f}" if all(pair) else "–"

    rows = [[f"`{d}`"] + [cell(d, s) for s in schemes] + [ratio(d)] for d in datasets]
    header = ["Dataset"] + [_scheme_title(s) for s in schemes] + ["weighted12 / weighted"]
    body = _markdown_table(header, rows) if rows else "(no run recorded train_seconds)"
    return (
        "# Training time\n\nMean training time in seconds (n = seeds with a recorded time) per dataset and "
        "scheme; the last column is the ratio of the mean time of `weighted12` (1st & 2nd layer) to "
        "`weighted` (all three layers).\n\n" + body + "\n"
    )


# ----------------------------------------------------------------------------------------- figure


def plot_scores(table: Table, path: PathLike, alpha: float) -> Path:
    """Write ``scores.png``: a strip plot (every run a dot, the mean a bar) per dataset and scheme.

    table: the analysed grid; path: the PNG to write (atomically); alpha: the level behind the † marks.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_rows = max(len(table.datasets), 1)
    fig, axes = plt.subplots(n_rows, 1, figsize=(1.3 * max(len(table.schemes), 3) + 2, 2.8 * n_rows), squeeze=False)
    for ax, dataset in zip(axes[:, 0], table.datasets):
        labels = []
        for x, scheme in enumerate(table.schemes):
            cell = table.cells.get((dataset, scheme))
            labels.append(scheme + ("\n(best)" if cell and cell.best else "†" if cell and cell.worse else ""))
            if cell:
                jitter = np.linspace(-0.15, 0.15, len(cell.scores)) if len(cell.scores) > 1 else [0.0]
                ax.scatter(x + np.asarray(jitter), 100 * np.asarray(cell.scores), s=14, alpha=0.7)
                ax.hlines(100 * cell.mean, x - 0.3, x + 0.3, color="black")
        ax.set_xticks(range(len(table.schemes)), labels, fontsize=8)
        ax.set_title(_row_label(table, dataset).replace("`", ""), fontsize=10)
        ax.set_ylabel("test score (%)")
        ax.grid(axis="y", alpha=0.3)
    if not table.datasets:
        axes[0, 0].text(0.5, 0.5, "no results found", ha="center", va="center")
    fig.suptitle(f"dots: runs (seeds); bar: mean; †: worse than the best (Welch's t-test, p < {alpha:g})", fontsize=9)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    with atomic_write(path) as tmp:
        tmp.write_bytes(buffer.getvalue())
    return Path(path)


# ----------------------------------------------------------------------------------------- the API


@dataclass
class CompareReport:
    """What :func:`compare` read and wrote.

    results: the loaded runs, missing runs and notes; table: the analysed grid; outputs: name -> path.
    """

    results: Results
    table: Table
    outputs: Dict[str, Path]


def compare(
    results_dir: PathLike,
    datasets: Optional[Sequence[str]] = None,
    schemes: Optional[Sequence[str]] = None,
    seeds: Optional[Sequence[int]] = None,
    alpha: float = 0.01,
) -> CompareReport:
    """Read ``results_dir/runs`` and write table.md, scores.png, layer_weights.md and timing.md there.

    results_dir: the results folder (layout in the module docstring); datasets/schemes/seeds: the
    expected grid, for reporting missing runs (None: every value found); alpha: significance level.
    """
    results_dir = Path(results_dir)
    results = load_results(results_dir, datasets, schemes, seeds)
    table = build_table(results, alpha)
    outputs = {
        "table": write_text_atomic(results_dir / "table.md", render_table(table, results, alpha)),
        "scores": plot_scores(table, results_dir / "scores.png", alpha),
        "layer_weights": write_text_atomic(results_dir / "layer_weights.md", render_layer_weights(results)),
        "timing": write_text_atomic(results_dir / "timing.md", render_timing(results)),
    }
    return CompareReport(results, table, outputs)
