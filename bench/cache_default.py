"""The in-memory layer cache at inference: peak RSS, hit rate and time, cache on vs off.

    OMP_NUM_THREADS=1 python bench/cache_default.py [--n 4000] [--repeats 10] [--model-mb 512]

Runs the ``elmo`` component (embedded default model) in a fresh process per configuration over
(a) ``--n`` unique sentences and (b) ``--n / --repeats`` unique sentences each seen ``--repeats``
times, with ``cache_memory_mb`` 0 and ``--model-mb``. What decides the component's inference default
(see README, "The layer cache").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SPACY_ELMO_MIX_SHARED", REPO.parent / "shared"))
CORPUS = SHARED / "data" / "raw_text" / "train-00.txt"


def run_one(n_unique: int, repeats: int, cache_mb: float) -> dict:
    """Process the texts in this process; peak RSS (MiB), cache hit rate, seconds."""
    import spacy
    import torch

    from spacy_elmo_mix.layers.bilm_model import layer_cache

    torch.set_num_threads(1)
    lines = [line.strip() for line in CORPUS.open(encoding="utf-8") if line.strip()][:n_unique]
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": {"cache_memory_mb": cache_mb}})
    nlp.initialize()
    list(nlp.pipe(lines[:8]))
    start = time.perf_counter()
    for _ in range(repeats):
        for _doc in nlp.pipe(lines, batch_size=64):
            pass
    seconds = time.perf_counter() - start
    cache = layer_cache(nlp.get_pipe("elmo").model)
    hit_rate = cache.stats.hit_rate if cache is not None else 0.0
    return {
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "hit_rate": hit_rate,
        "seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=4000, help="sentences processed per configuration")
    parser.add_argument("--repeats", type=int, default=10, help="times each sentence is seen in the repeated workload")
    parser.add_argument("--model-mb", type=float, default=512, help="the cache budget compared with no cache")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(*json.loads(args.one))))
        return
    print("| workload | cache_memory_mb | peak RSS MiB | hit rate | seconds |\n|---|---|---|---|---|")
    for label, unique, repeats in (
        (f"{args.n} unique", args.n, 1),
        (f"{args.n // args.repeats} unique x {args.repeats}", args.n // args.repeats, args.repeats),
    ):
        for mb in (0, args.model_mb):
            out = subprocess.run(
                [sys.executable, __file__, "--one", json.dumps([unique, repeats, mb])],
                capture_output=True,
                text=True,
                check=True,
            )
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(
                f"| {label} | {mb:g} | {r['peak_rss_mib']:.0f} | {r['hit_rate']:.2f} | {r['seconds']:.1f} |", flush=True
            )


if __name__ == "__main__":
    main()
