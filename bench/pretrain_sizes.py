"""Which biLM size learns most per CPU minute? A learning-curve comparison at equal compute (issue 14).

Each size is pretrained for the same wall-clock minutes with the same data, vocabulary definition
(the embedded model's: ``--min-count 3 --max-vocab 40000``), schedule and seed, on all cores
(``torchrun --standalone``, one thread per process), one size after the other; held-out
perplexity (the model card's ``heldout.txt`` and vocabulary definition) is evaluated every
``--eval-every`` steps. The table gives, per size, the parameters and ``weights.hdf5`` megabytes,
the predicted tokens/s, and the held-out perplexity (mean of both directions) at each evaluation
and at fractions of the budget (interpolated on training minutes), so sizes are compared at equal
compute rather than equal steps.

Usage (from the repository root)::

    .venv/bin/python bench/pretrain_sizes.py [--minutes 7] [--processes 2]
        [--sizes 512x128 1024x128 512x256] [--output bench/results/pretrain_sizes.md] [--keep DIR]

Sizes are ``CELLSxPROJECTION``; the char-CNN is the embedded model's (filters
1:32,2:32,3:64,4:128,5:256, 16-dim characters, one highway layer).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

import numpy as np
import torch
from pretrain_scaling import cpu_flags, pretrain, run

from bilm_speed import SHARED, cpu_name  # bench/ is this script's folder
from spacy_elmo_mix.atomic import write_text_atomic

EMBEDDED = [
    "--filters",
    "1:32,2:32,3:64,4:128,5:256",
    "--char-dim",
    "16",
    "--n-highway",
    "1",
    "--clip",
    "3",
    "--min-count",
    "3",
    "--max-vocab",
    "40000",
    "--max-len",
    "30",
    "--batch-tokens",
    "2000",
    "--lr",
    "2e-3",
    "--warmup",
    "300",
    "--dropout",
    "0.1",
    "--seed",
    "0",
    "--checkpoint-every",
    "0",
    "--no-progress",
    "--threads",
    "1",
]


def train_size(size: str, minutes: float, processes: int, eval_every: int, folder: Path) -> Dict:
    """Pretrain one ``CELLSxPROJECTION`` size for ``minutes``; its history, rate and file size."""
    cells, projection = size.split("x")
    raw = SHARED / "data" / "raw_text"
    output = folder / size
    args = [
        "--heldout",
        str(raw / "heldout.txt"),
        "--lstm-dim",
        cells,
        "--projection-dim",
        projection,
        "--max-minutes",
        str(minutes),
        "--eval-every",
        str(eval_every),
        *EMBEDDED,
    ]
    run(pretrain(sorted(str(p) for p in raw.glob("train-*.txt")), output, args, processes))
    state = torch.load(output / "checkpoint.pt", map_location="cpu", weights_only=False)
    history = state["history"]
    train = history["train"]
    tokens, seconds = sum(row[3] for row in train[1:]), train[-1][4] - train[0][4]
    return {
        "size": size,
        "parameters": sum(t.numel() for k, t in state["model"].items() if k.startswith("bilm.")),
        "weights_mb": (output / "weights.hdf5").stat().st_size / 1e6,
        "steps": train[-1][0],
        "tokens_per_s": tokens / seconds if seconds > 0 else 0.0,
        "heldout": [[step, (fw + bw) / 2, elapsed / 60] for step, fw, bw, elapsed in history["heldout"]],
    }


def perplexity_at(row: Dict, minutes: float) -> float:
    """Held-out perplexity interpolated (in log space) at ``minutes`` of training; nan before the first evaluation."""
    points = row["heldout"]
    if not points or minutes < points[0][2]:
        return float("nan")
    times, logs = [p[2] for p in points], [np.log(p[1]) for p in points]
    return float(np.exp(np.interp(minutes, times, logs)))


def markdown(rows: List[Dict], minutes: float, processes: int) -> str:
    """The comparison as a markdown table with the machine and settings in its header."""
    fractions = [0.5, 0.75, 1.0]
    header = (
        f"biLM sizes at equal compute: {minutes:g} minutes each on {processes} processes (torchrun, one thread each), "
        f"{cpu_name()} ({cpu_flags()}), torch {torch.__version__}; data ../shared/data/raw_text/train-*.txt, "
        "held-out heldout.txt, vocabulary min-count 3 / max 40,000, embedded model's char-CNN and schedule. "
        "Perplexity: mean of forward and backward, interpolated at the given training minutes."
    )
    lines = [
        header,
        "",
        "| cells x projection | parameters | weights.hdf5 MB | steps | predicted tokens/s | "
        + " | ".join(f"ppl at {f * minutes:g} min" for f in fractions)
        + " |",
        "|---|---:|---:|---:|---:|" + "---:|" * len(fractions),
    ]
    for r in rows:
        ppls = " | ".join(f"{perplexity_at(r, f * minutes):.1f}" for f in fractions)
        lines.append(
            f"| {r['size']} | {r['parameters']:,} | {r['weights_mb']:.1f} | {r['steps']:,} | {r['tokens_per_s']:,.0f} | {ppls} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=7.0, help="training minutes per size")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--eval-every", type=int, default=100, help="held-out evaluation every N steps")
    parser.add_argument("--sizes", nargs="+", default=["512x128", "1024x128", "512x256"])
    parser.add_argument("--output", type=Path, default=Path("bench/results/pretrain_sizes.md"))
    parser.add_argument(
        "--keep", type=Path, help="train into DIR/SIZE and keep the runs (e.g. to continue one with --resume)"
    )
    args = parser.parse_args()
    if not (SHARED / "data" / "raw_text").is_dir():
        sys.exit(f"error: {SHARED / 'data' / 'raw_text'} is absent (the shared raw text corpus)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            print(f"training {size} for {args.minutes:g} minutes", flush=True)
            rows.append(train_size(size, args.minutes, args.processes, args.eval_every, args.keep or Path(tmp)))
            print(json.dumps(rows[-1]), flush=True)
    text = markdown(rows, args.minutes, args.processes)
    print(text)
    write_text_atomic(args.output, text)
    write_text_atomic(args.output.with_suffix(".json"), json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
