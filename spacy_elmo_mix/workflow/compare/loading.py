"""Loading the comparison's runs: read and check each run's metrics.json, work out the missing runs
and pool the finished ones that one table may average.

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

Missing or unreadable runs are listed in the notes (and returned) instead of stopping the comparison.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple, Union

from ...errors import ElmoFileError, ElmoInputError
from ..convert import load_datasets
from ..grid import run_folders
from ..identity import absent_inputs, absent_inputs_message, stale_reason
from ..run import BASELINE

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
REQUIRED = ("dataset", "scheme", "seed", "score", "metric")


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
    ElmoFileError, and so do runs whose recorded input files are not here (:func:`absent_inputs`: a
    fresh clone before ``convert``), since they can be neither checked nor called out of date.
    """
    results, unchecked = Results(), 0
    absent: Dict[str, str] = {}  # dataset -> the first input file of its runs that is not here
    if not Path(results_dir).is_dir():
        raise ElmoFileError(f"{results_dir}: no such results folder")
    selected: Tuple[Set[str], Set[str], Set[int]] = (
        set(datasets or ()),
        set(schemes or ()),
        {int(n) for n in seeds or ()},
    )
    on_disk = {(job.dataset, job.scheme, job.seed): run_dir for job, run_dir in run_folders(results_dir)}
    found: Dict[RunKey, Path] = {
        key: run_dir
        for key, run_dir in on_disk.items()
        # zip pairs the str, str and int of a key with their sets, which mypy sees as object
        if all(not chosen or value in chosen for value, chosen in zip(key, selected))  # type: ignore[operator]
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
        elif gone := absent_inputs(data["identity"]):
            absent.setdefault(key[0], gone[0])
            continue
        elif stale_reason(data["identity"]) is not None:
            results.missing[key] = f"out of date: {stale_reason(data['identity'])} since it ran (rerun the grid)"
            continue
        results.runs.append(run)
        note = add_extras(run, data, metrics)
        if note:
            results.notes.append(note)
    if absent:
        raise ElmoFileError(absent_inputs_message(absent))
    grid_datasets = datasets or sorted({k[0] for k in found})
    grid_schemes = schemes or sorted({k[1] for k in found})
    grid_seeds = seeds or sorted({k[2] for k in found})
    for key in ((d, s, int(n)) for d in grid_datasets for s in grid_schemes for n in grid_seeds):
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
        present = {str(key[position]) for key in on_disk}
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
