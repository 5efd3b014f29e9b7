"""Pretraining at scale: tokens/s on 1 vs N processes (torchrun, same global batch) and peak memory
of the in-memory and streaming readers at two corpus sizes.

Usage (from the repository root)::

    .venv/bin/python bench/pretrain_scaling.py [--corpus-dir ../shared/data/raw_text] [--steps 40]
        [--processes 2] [--output bench/results/pretrain_scaling.md]

Throughput: ``pretrain`` is run in a 1-process and an N-process (``torchrun --standalone``, gloo)
configuration with one thread per process, the same model, seed and global batch
(``--batch-tokens``); the figure is the command's own "predicted tokens/s" (global batch tokens per
second of training, first step excluded), and the efficiency is ``tokens/s(N) / (N * tokens/s(1))``.
Memory: the peak resident set (``wait4`` of the child) of a 3-step run on the first file of the
corpus and on four files (4x), with and without ``--stream``. The runs are side by side in one
invocation, so the ratios are comparable on a shared machine; absolute figures are not.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List

from bilm_speed import cpu_name  # bench/ is this script's folder
from spacy_elmo_mix.atomic import write_text_atomic

MODEL = [
    "--lstm-dim",
    "256",
    "--projection-dim",
    "64",
    "--filters",
    "1:32,2:32,3:64,4:128",
    "--char-dim",
    "16",
    "--max-len",
    "20",
    "--dropout",
    "0",
    "--eval-every",
    "0",
    "--checkpoint-every",
    "0",
    "--no-progress",
    "--threads",
    "1",
    "--pretokenized",
    "--min-count",
    "2",
    "--max-vocab",
    "20000",
]
RATE = re.compile(r"([0-9]+) predicted tokens/s")


def cpu_flags() -> str:
    """The SIMD flags that matter for these figures (AVX-512, bf16, AMX) from ``/proc/cpuinfo``."""
    try:
        flags = next(
            line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")
        ).split()
    except (OSError, StopIteration):
        return "unknown"
    wanted = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    return ", ".join(wanted) or "none of avx2/avx512f/avx512_bf16/amx_bf16"


def run(command: List[str]) -> str:
    """The stdout of ``command`` (one thread per process); exits with its stderr when it fails."""
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if done.returncode:
        sys.exit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stderr[-3000:]}")
    return done.stdout


def pretrain(files: List[str], output: Path, args: List[str], processes: int = 1) -> List[str]:
    """The ``pretrain`` command line on ``files`` (under torchrun for several processes)."""
    launcher = (
        [sys.executable, "-m", "spacy_elmo_mix"]
        if processes == 1
        else [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            str(processes),
            "-m",
            "spacy_elmo_mix",
        ]
    )
    return launcher + ["pretrain", *files, "--output", str(output), *args]


def peak_rss(files: List[str], output: Path, stream: bool) -> int:
    """Peak RSS (MiB) of a 3-step run, measured by ``wait4`` on exactly this child."""
    command = pretrain(
        files, output, MODEL + ["--max-steps", "3", "--batch-tokens", "2000"] + (["--stream"] if stream else [])
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    if status:
        sys.exit(f"failed: {' '.join(command)}\n{child.stderr.read().decode()[-3000:]}")
    return usage.ru_maxrss // 1024


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--corpus-dir",
        default="../shared/data/raw_text",
        help="folder of train-*.txt files (whitespace-tokenized text)",
    )
    p.add_argument("--steps", type=int, default=40, help="training steps per throughput run")
    p.add_argument("--batch-tokens", type=int, default=4000, help="global batch (predicted tokens)")
    p.add_argument("--processes", type=int, default=2, help="processes of the data-parallel run")
    p.add_argument("--output", default="bench/results/pretrain_scaling.md", help="markdown table to write")
    args = p.parse_args()
    files = sorted(str(f) for f in Path(args.corpus_dir).glob("train-*.txt"))
    if len(files) < 4:
        sys.exit(f"need at least 4 train-*.txt files in {args.corpus_dir}")
    with tempfile.TemporaryDirectory() as tmp:
        common = MODEL + ["--max-steps", str(args.steps), "--batch-tokens", str(args.batch_tokens)]
        rates = {}
        for n in (1, args.processes):
            out = run(pretrain(files[:1], Path(tmp) / f"p{n}", common, processes=n))
            rates[n] = float(RATE.search(out).group(1))
            print(f"{n} process(es): {rates[n]:.0f} predicted tokens/s", flush=True)
        efficiency = rates[args.processes] / (args.processes * rates[1])
        memory = {}
        for stream in (False, True):
            for size, chosen in (("1x", files[:1]), ("4x", files[:4])):
                memory[stream, size] = peak_rss(chosen, Path(tmp) / f"m{stream}{size}", stream)
                print(f"{'stream' if stream else 'in memory'} {size}: peak RSS {memory[stream, size]} MiB", flush=True)
    rows = [
        f"# Pretraining scaling\n\nCPU: {cpu_name()} ({os.cpu_count()} cores visible; flags: {cpu_flags()}); one thread per process, "
        f"gloo. Model: `{' '.join(MODEL[:10])}`; global batch {args.batch_tokens} predicted tokens; {args.steps} steps on "
        f"{Path(files[0]).name}. No GPU was lent to the session that produced this table.\n",
        "| processes | predicted tokens/s | speed-up | efficiency |",
        "|---|---|---|---|",
        f"| 1 | {rates[1]:.0f} | 1.00 | 100% |",
        f"| {args.processes} | {rates[args.processes]:.0f} | {rates[args.processes] / rates[1]:.2f} | {100 * efficiency:.0f}% |",
        "",
        "| reader | peak RSS 1x (MiB) | peak RSS 4x (MiB) | 4x / 1x |",
        "|---|---|---|---|",
    ]
    for stream in (False, True):
        a, b = memory[stream, "1x"], memory[stream, "4x"]
        rows.append(f"| {'--stream' if stream else 'in memory'} | {a} | {b} | {b / a:.2f} |")
    write_text_atomic(args.output, "\n".join(rows) + "\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
