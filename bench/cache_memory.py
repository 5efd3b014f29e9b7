"""Peak memory (RSS) of embedding N sentences: outputs kept in memory vs the layer cache.

    python bench/cache_memory.py [--n 10000] [--options O --weights W | --synthetic 1024] [--output FILE]

Each configuration runs in a fresh process (peak RSS is per process) and embeds the first N lines of
a raw-text file (whitespace tokens, at most --max-length per sentence):

- keep: every sentence's float32 layers kept in a list (what a program without a cache holds);
- memory cache: a memory-only LayerCache (float16, default 512 MiB budget), then every entry read back;
- disk cache, write + read: each batch written to the disk cache (no memory tier) and dropped, then
  every entry read back memory-mapped;
- disk cache, read only: a fresh process reading every entry back (training epochs after the first).

The model is the tiny bilm-tf fixture by default, or ``--synthetic WIDTH``: random ELMo-shaped layers
of that width (3 layers, no biLM run) to see the published model's sizes without its compute.
Baseline is the RSS after the model is loaded and has embedded one batch; anonymous and file-backed
RSS are sampled after every batch (file-backed pages of the memory-mapped shards are clean page cache
the kernel can drop). Prints a markdown table (and writes it to --output).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Dict, List

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SPACY_ELMO_MIX_SHARED", REPO.parent / "shared"))
TINY = SHARED / "elmo_fixtures" / "tf_fixture"
CORPUS = SHARED / "data" / "raw_text" / "train-00.txt"
MODES = {
    "keep": "keep all outputs in memory (float32)",
    "memory": "memory-only cache (float16, 512 MiB budget)",
    "disk-write": "disk cache (float16): write, then read back memory-mapped",
    "disk-read": "disk cache (float16): read only, fresh process",
}
SYNTHETIC_FINGERPRINT = "5e" * 20


class RssMonitor:
    """Largest resident set sizes seen by :meth:`sample` (MiB), from ``/proc/self/status``."""

    FIELDS = ("VmRSS", "RssAnon", "RssFile")

    def __init__(self):
        self.peak = {field: 0.0 for field in self.FIELDS}

    def sample(self) -> Dict[str, float]:
        now = {}
        with open("/proc/self/status") as status:
            for line in status:
                name, _, value = line.partition(":")
                if name in self.FIELDS:
                    now[name] = int(value.split()[0]) / 1024
        for field, value in now.items():
            self.peak[field] = max(self.peak[field], value)
        return now


def load_sentences(corpus: Path, n: int, max_length: int) -> List[List[str]]:
    """The first ``n`` non-empty lines of ``corpus`` as token lists of at most ``max_length`` tokens."""
    sentences = []
    with open(corpus, encoding="utf-8") as lines:
        for line in lines:
            tokens = line.split()[:max_length]
            if tokens:
                sentences.append(tokens)
            if len(sentences) == n:
                break
    return sentences


def model_parts(args) -> tuple:
    """``(compute, make_cache)``: compute(batch) -> float32 layers; make_cache(directory, memory_bytes)."""
    from spacy_elmo_mix.cache import LayerCache

    if args.synthetic:
        width = args.synthetic

        def compute(batch):
            out = []
            for tokens in batch:
                rng = np.random.default_rng(zlib.crc32(" ".join(tokens).encode("utf-8")))
                layers = rng.standard_normal((3, len(tokens), width), dtype=np.float32)
                layers[0, :, width // 2 :] = layers[0, :, : width // 2]
                out.append(layers)
            return out

        return compute, lambda d, m: LayerCache(d, SYNTHETIC_FINGERPRINT, 3, width, memory_bytes=m)
    from spacy_elmo_mix.bilm import ElmoEmbedder

    embedder = ElmoEmbedder(args.options, args.weights)
    return embedder.embed_batch, lambda d, m: LayerCache.for_model(embedder.model, d, memory_bytes=m)


def run_mode(args) -> dict:
    """Run one configuration in this process; returns its measurements."""
    from spacy_elmo_mix.cache import DEFAULT_MEMORY_BYTES

    sentences = load_sentences(args.corpus, args.n, args.max_length)
    batches = [sentences[i : i + args.batch_size] for i in range(0, len(sentences), args.batch_size)]
    compute, make_cache = model_parts(args)
    compute(batches[0])  # warm-up, part of the baseline
    monitor = RssMonitor()
    baseline = monitor.sample()
    memory_bytes = DEFAULT_MEMORY_BYTES if args.mode == "memory" else 0
    cache = None if args.mode == "keep" else make_cache(None if args.mode == "memory" else args.cache_dir, memory_bytes)
    kept: List[np.ndarray] = []
    for batch in batches if args.mode != "disk-read" else []:
        layers = compute(batch)
        if cache is None:
            kept.extend(layers)
        else:
            cache.put_many(batch, layers)
        monitor.sample()
    total = sum(float(a[:, :, 0].sum()) for a in kept)
    for batch in batches if cache is not None else []:
        found = cache.get_many(batch)
        assert all(a is not None for a in found), "a sentence was missing from the cache"
        total += sum(float(a[:, :, 0].sum()) for a in found)
        monitor.sample()
    return {
        "mode": args.mode,
        "sentences": len(sentences),
        "tokens": sum(len(s) for s in sentences),
        "baseline_mib": baseline["VmRSS"],
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "peak_anon_mib": monitor.peak["RssAnon"],
        "peak_file_mib": monitor.peak["RssFile"],
        "kept_mib": sum(a.nbytes for a in kept) / 2**20,
        "cache_memory_mib": 0.0 if cache is None else cache.stats.memory_bytes / 2**20,
        "checksum": total,
    }


def run_all(args) -> List[dict]:
    """Each mode in a fresh process, in order (disk-read reads what disk-write wrote)."""
    rows = []
    cache_dir = Path(tempfile.mkdtemp(prefix="elmo-cache-bench-"))
    try:
        for mode in MODES:
            command = [sys.executable, __file__, "--mode", mode, "--cache-dir", str(cache_dir)] + forwarded(args)
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode:
                raise RuntimeError(f"{mode} failed:\n{result.stderr[-3000:]}")
            rows.append(json.loads(result.stdout.strip().splitlines()[-1]))
        disk_bytes = sum(p.stat().st_size for p in cache_dir.rglob("*") if p.is_file())
        for row in rows:
            row["disk_mib"] = disk_bytes / 2**20 if row["mode"].startswith("disk") else 0.0
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    return rows


def forwarded(args) -> List[str]:
    options = ["--n", str(args.n), "--batch-size", str(args.batch_size), "--max-length", str(args.max_length)]
    options += ["--corpus", str(args.corpus)]
    if args.synthetic:
        return options + ["--synthetic", str(args.synthetic)]
    return options + ["--options", str(args.options), "--weights", str(args.weights)]


def table(rows: List[dict], args) -> str:
    """The markdown report: settings, then one row per mode."""
    model = f"synthetic layers, width {args.synthetic}" if args.synthetic else f"{args.options}"
    lines = [
        f"Peak RSS of embedding {rows[0]['sentences']:,} sentences ({rows[0]['tokens']:,} tokens) of "
        f"`{args.corpus.name}`; model: {model}; batch {args.batch_size}.",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"numpy {np.__version__}. MiB = 2^20 bytes; 'over baseline' = peak RSS - RSS after loading the model.",
        "",
        "| configuration | peak RSS | over baseline | peak anon RSS | peak file-backed RSS | "
        "float32 kept | cache in memory | cache on disk |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {MODES[row['mode']]} | {row['peak_mib']:.0f} | {row['peak_mib'] - row['baseline_mib']:.0f} | "
            f"{row['peak_anon_mib']:.0f} | {row['peak_file_mib']:.0f} | {row['kept_mib']:.0f} | "
            f"{row['cache_memory_mib']:.0f} | {row['disk_mib']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="sentences to embed")
    parser.add_argument("--options", type=Path, default=TINY / "options.json")
    parser.add_argument("--weights", type=Path, default=TINY / "lm_weights.hdf5")
    parser.add_argument("--synthetic", type=int, default=0, help="random layers of this width instead of a model")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="one sentence per line")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=200)
    parser.add_argument("--output", type=Path, help="also write the markdown table here")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    parser.add_argument("--mode", choices=list(MODES), help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.mode:
        print(json.dumps(run_mode(args)))
        return 0
    if not args.corpus.exists() or not (args.synthetic or args.options.exists()):
        print(f"error: {args.corpus} or {args.options} is missing (see ../shared)", file=sys.stderr)
        return 1
    rows = run_all(args)
    report = table(rows, args)
    print(report)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(report)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        model = f"synthetic-{args.synthetic}" if args.synthetic else str(args.options)
        args.json.write_text(json.dumps({"model": model, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
