"""Do the faster training code's results come from the same distribution as the committed ones?

Issue 42's condition: the step-packed BiLSTM kernel and the scaled CRF change the order of float32
sums, so a seed's score may differ in its last digits, but no cell's distribution may move. This
reads one data set's committed runs (``results/runs/DATASET``) and its rerun with the new code
(``results/speed_rerun/runs/DATASET``, made by ``grid`` with the protocol's command), checks that
each rerun has the committed run's identity (command, settings, data, config and biLM hashes) for
the same seed, and compares every cell's scores with Welch's two-sided t-test: a p-value below 0.05
would say that the cell moved. Run from the repository root::

    python bench/equal_distribution.py --dataset ud_ewt --output results/speed_rerun/README.md

``tests/test_equal_distribution.py`` runs the same comparison on the committed files.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from scipy.stats import ttest_ind

from spacy_elmo_mix.atomic import write_text_atomic

ALPHA = 0.05


def load_cell(folder: Path) -> Dict[int, dict]:
    """The runs of one cell (``folder/seedN/metrics.json``), by seed."""
    runs = {}
    for path in sorted(folder.glob("seed*/metrics.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        runs[int(data["seed"])] = data
    return runs


def compare(committed: Path, rerun: Path) -> List[dict]:
    """One row per cell found in both folders: scores, Welch's two-sided p, seeds scored the
    same, mean epochs and minutes. ValueError where a rerun's identity is not the committed run's."""
    rows = []
    for cell in sorted(p.name for p in rerun.iterdir() if p.is_dir() and (committed / p.name).is_dir()):
        old, new = load_cell(committed / cell), load_cell(rerun / cell)
        for seed in sorted(set(old) & set(new)):
            if old[seed]["identity"] != new[seed]["identity"]:
                raise ValueError(f"{rerun / cell}/seed{seed}: another identity than {committed / cell}/seed{seed}")
        a, b = [r["score"] for r in old.values()], [r["score"] for r in new.values()]
        rows.append(
            {
                "cell": cell,
                "committed": a,
                "rerun": b,
                "p_value": float(ttest_ind(a, b, equal_var=False).pvalue),
                "same_score": sum(old[s]["score"] == new[s]["score"] for s in set(old) & set(new)),
                "shared_seeds": len(set(old) & set(new)),
                "epochs": (_mean(old, "epochs"), _mean(new, "epochs")),
                "minutes": (_mean(old, "train_seconds") / 60, _mean(new, "train_seconds") / 60),
                "commits": sorted({r.get("environment", {}).get("git_commit", "")[:7] for r in new.values()}),
                "cpus": sorted({_cpu(r.get("environment", {})) for r in new.values()}),
            }
        )
    return rows


def _cpu(environment: dict) -> str:
    return f"{environment.get('cpu', 'an unrecorded CPU')} ({' '.join(environment.get('cpu_flags', []))})"


def _mean(runs: Dict[int, dict], key: str) -> float:
    return statistics.mean(r[key] for r in runs.values())


def _score(scores: Sequence[float]) -> str:
    return f"{100 * statistics.mean(scores):.2f} ± {100 * statistics.stdev(scores):.2f} (n={len(scores)})"


def render(dataset: str, rows: List[dict]) -> str:
    lines = [
        f"# {dataset}: the committed runs beside a rerun with the faster training code (issue 42)",
        "",
        f"Rerun with commit {', '.join(sorted({c for r in rows for c in r['commits']}))} (step-packed BiLSTM kernel, "
        "scaled forward-backward CRF), same command, settings, corpus, config and biLM as the committed runs "
        "(their identities are equal seed by seed). Welch's two-sided t-test per cell; p < "
        f"{ALPHA} would mean the cell moved. Scores are test accuracy in %, mean ± sd.",
        "",
        "| cell | committed | rerun | p | seeds with the same score | epochs (committed, rerun) | minutes per run (committed, rerun) |",
        "|---|---|---|---:|---:|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['cell']} | {_score(r['committed'])} | {_score(r['rerun'])} | {r['p_value']:.3f} | "
            f"{r['same_score']} of {r['shared_seeds']} | {r['epochs'][0]:.1f}, {r['epochs'][1]:.1f} | "
            f"{r['minutes'][0]:.1f}, {r['minutes'][1]:.1f} |"
        )
    cpus = sorted({c for r in rows for c in r["cpus"]})
    lines += [
        "",
        f"Minutes: the rerun's on {'; '.join(cpus)}, two runs side by side, one thread each; the "
        "committed runs' machine is not in their metrics.json, so the two columns are not a side-by-side "
        "measurement (docs/benchmarks.md has those).",
    ]
    moved = [r["cell"] for r in rows if r["p_value"] < ALPHA]
    lines += ["", f"Cells that moved (p < {ALPHA}): {', '.join(moved) if moved else 'none'}."]
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="ud_ewt")
    parser.add_argument("--committed", type=Path, default=Path("results/runs"))
    parser.add_argument("--rerun", type=Path, default=Path("results/speed_rerun/runs"))
    parser.add_argument("--output", type=Path, help="also write the markdown table here")
    args = parser.parse_args(argv)
    text = render(args.dataset, compare(args.committed / args.dataset, args.rerun / args.dataset))
    print(text, end="")
    if args.output:
        write_text_atomic(args.output, text)


if __name__ == "__main__":
    main()
