"""tokens/s of ``ElmoEmbedder.embed_sentences`` against batch size, with and without length bucketing.

A stream of held-out sentences (5-60 tokens, in file order) is embedded with ``sort_batches=1``
(batches in input order) and ``sort_batches=8`` (each window of 8 batches sorted by length), timed in
turn, medians of ``--reps`` after a warm-up pass. Exact float32 with torch's current thread count
(``--threads``). Also prints the mean number of sentences active per LSTM step of both batchings
(the row count of the recurrent matrix products).

Usage: ``python bench/bucketing_speed.py [--model full|embedded] [--sentences 128] [--batch-sizes 8 32] [--threads 2]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import List, Optional, Sequence

import torch

from bilm_speed import MODELS, build_model, cpu_name, load_sentences
from spacy_elmo_mix.atomic import write_text_atomic
from spacy_elmo_mix.bilm import ElmoEmbedder
from spacy_elmo_mix.bilm.embedder import length_batches
from spacy_elmo_mix.bilm.loading import save_bilm


def mean_active_rows(lengths: List[int], batch_size: int, sort_batches: int) -> float:
    """Mean sentences active per LSTM step (``<S>``/``</S>`` included) over the stream's batches."""
    rows = steps = 0
    window = batch_size * sort_batches
    for w in range(0, len(lengths), window):
        part = lengths[w : w + window]
        batches = (
            length_batches(part, batch_size)
            if sort_batches > 1
            else [list(range(i, min(i + batch_size, len(part)))) for i in range(0, len(part), batch_size)]
        )
        for batch in batches:
            rows += sum(part[i] + 2 for i in batch)
            steps += max(part[i] + 2 for i in batch)
    return rows / steps


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=["full", "embedded"], default="full")
    parser.add_argument("--sentences", type=int, default=128)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's default)")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--output", type=Path, help="also write the markdown table here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    name = next(n for n in MODELS if n.startswith(args.model))
    sentences = load_sentences(args.sentences)
    n_tokens = sum(map(len, sentences))
    lines = [
        f"`embed_sentences` on {len(sentences)} held-out sentences ({n_tokens} tokens, 5-60 each), {name}, exact float32, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {cpu_name()}, load average {os.getloadavg()[0]:.1f} before; "
        f"medians of {args.reps} passes timed in turn.",
        "",
        "| batch | sort_batches=1 tokens/s | sort_batches=8 tokens/s | speed-up | mean active rows per step, 1 / 8 |",
        "|---:|---:|---:|---:|---:|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        files = save_bilm(build_model(MODELS[name], torch.float32), Path(tmp))
        embedder = ElmoEmbedder(files / "options.json", files / "weights.hdf5")
        for batch_size in args.batch_sizes:
            times = {1: [], 8: []}
            for rep in range(args.reps + 1):
                for sort in times:
                    start = time.perf_counter()
                    for _ in embedder.embed_sentences(sentences, batch_size=batch_size, sort_batches=sort):
                        pass
                    if rep:
                        times[sort].append(time.perf_counter() - start)
            rate = {k: n_tokens / statistics.median(v) for k, v in times.items()}
            active = [mean_active_rows([len(s) for s in sentences], batch_size, k) for k in (1, 8)]
            lines.append(
                f"| {batch_size} | {rate[1]:,.0f} | {rate[8]:,.0f} | {rate[8] / rate[1]:.2f}x | {active[0]:.1f} / {active[1]:.1f} |"
            )
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        write_text_atomic(args.output, text)


if __name__ == "__main__":
    main()
