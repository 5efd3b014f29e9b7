"""Rendering the comparison as Markdown: ``table.md`` (caption, the table with the paper's rows,
numbered notes), ``layer_weights.md`` and ``timing.md``."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from ..paper_table import LABEL as PAPER_LABEL
from ..paper_table import NOT_RUN, paper_row
from ..paper_table import SOURCE as PAPER_SOURCE
from .loading import DATASETS, SCHEMES, Results, RunKey
from .statistics import Cell, Table, dataset_order, scheme_order

METRICS = {"ents_f": "F1", "tag_acc": "accuracy", "pos_acc": "accuracy", "cats_acc": "accuracy", "dep_las": "LAS"}


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
    return [row.label] + cells


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
    rows = {d: row for d in table.datasets if (row := paper_row(d)) is not None}
    if not rows:
        return []
    notes = [
        f"{PAPER_LABEL}: {PAPER_SOURCE}. Its `*` marks a score significantly worse than its row's best at "
        "p < 0.01 (the paper does not name its test). Its scores come from the 5.5B ELMo model; ours from "
        "the biLM our runs name in their identity: hold the ranking of the schemes against the paper's, "
        "not the absolute scores."
    ]
    notes += [f"{row.label}, `{d}`: {row.note}" for d, row in rows.items() if row.note]
    return notes + [NOT_RUN]


def _layer_indices(scheme: str, n_weights: int) -> List[int]:
    """The ELMo layer index of each of a scheme's ``n_weights`` weights: the paper schemes' own
    layers (``layer2`` -> [1], ``weighted12`` -> [0, 1]), else 0..n-1."""
    from ...layers.scalar_mix import PAPER_SCHEMES

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
        two, three = times.get((dataset, "weighted12")), times.get((dataset, "weighted"))
        return f"{np.mean(two) / np.mean(three):.3f}" if two and three else "–"

    rows = [[f"`{d}`"] + [cell(d, s) for s in schemes] + [ratio(d)] for d in datasets]
    header = ["Dataset"] + [_scheme_title(s) for s in schemes] + ["weighted12 / weighted"]
    body = _markdown_table(header, rows) if rows else "(no run recorded train_seconds)"
    return (
        "# Training time\n\nMean training time in seconds (n = seeds with a recorded time) per dataset and "
        "scheme; the last column is the ratio of the mean time of `weighted12` (1st & 2nd layer) to "
        "`weighted` (all three layers).\n\n" + body + "\n"
    )
