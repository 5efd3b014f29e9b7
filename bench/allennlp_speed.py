"""The exact float32 biLM beside AllenNLP 2.10.1, side by side in one run.

A random biLM of the published "original" size (seed 0) is written as bilm-tf files
(``save_bilm``); both implementations embed the same 20-30-token held-out sentences from token lists
to numpy arrays, stateless (zero state per sentence), at each thread count and batch size. Each
round runs AllenNLP (``allennlp_elmo.py speed --repeats 1`` in the reference environment: one
warm-up batch, one timed pass), then ours as shipped (the two directions of a layer at the same
time, this CPU's default kernel set: ``spacy_elmo_mix/bilm/kernels.py``), the same on every other
kernel set the machine has (``BiLM.set_kernels``), with the directions one after the other
(``BiLM.concurrent_directions = False``), and with ``compute_dtype = "auto"`` (bfloat16 where the
CPU has bf16 units, else float32 again), then the ``[batch, 512] @ [512, 16384]`` matmul on the
default kernel set (``bilm_speed.matmul_job``); every figure is the median over the rounds, so all
see the same machine load.

The AllenNLP reference is looked up at ``$ALLENNLP_REFERENCE`` (default ``~/allennlp-reference``,
built by ``../shared/tools/allennlp_reference/setup.sh``); without it its rows are skipped with a
message.

Usage: ``python bench/allennlp_speed.py [--threads 1 2] [--batch-sizes 32 128] [--rounds 3] [--output F] [--json F]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence

import torch

from bilm_speed import MODELS, SHARED, batch_flops, cpu_name, load_sentences, matmul_job, model_options
from spacy_elmo_mix.atomic import write_text_atomic
from spacy_elmo_mix.bilm import BiLM, ElmoEmbedder
from spacy_elmo_mix.bilm.kernels import KERNELS, default_kernels, unavailable_reason
from spacy_elmo_mix.bilm.loading import save_bilm
from spacy_elmo_mix.bilm.precision import cpu_vendor, resolve_compute_dtype

REFERENCE = Path(os.environ.get("ALLENNLP_REFERENCE", Path.home() / "allennlp-reference"))
SCRIPT = SHARED / "tools" / "allennlp_reference" / "allennlp_elmo.py"
FULL = "full (4096/512, 2048 filters)"


def reference_python() -> Optional[Path]:
    """The reference environment's python, or None (with a message) when it or the script is absent."""
    python = REFERENCE / "venv" / "bin" / "python"
    if python.exists() and SCRIPT.exists():
        return python
    print(
        f"AllenNLP rows skipped: {python if not python.exists() else SCRIPT} is absent "
        f"(build it with ../shared/tools/allennlp_reference/setup.sh, or set ALLENNLP_REFERENCE)"
    )
    return None


def allennlp_tokens_per_s(python: Path, files: Path, sentences: Path, batch_size: int, threads: int) -> float:
    """One AllenNLP speed measurement (warm-up batch, then one timed pass) in its own process."""
    env = dict(
        os.environ, PYTHONPATH=str(REFERENCE / "shims"), OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads)
    )
    command = [
        str(python),
        str(SCRIPT),
        "speed",
        "--options",
        str(files / "options.json"),
        "--weights",
        str(files / "weights.hdf5"),
        "--sentences",
        str(sentences),
        "--batch-size",
        str(batch_size),
        "--threads",
        str(threads),
        "--repeats",
        "1",
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"AllenNLP speed run failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["tokens_per_s"]


def ours_tokens_per_s(embedder: ElmoEmbedder, sentences: List[List[str]], batch_size: int, variant: "Variant") -> float:
    """Our end-to-end tokens/s (token lists to numpy arrays) as ``variant`` runs, one warm-up batch
    then one timed pass."""
    embedder.model.concurrent_directions = variant.concurrent
    embedder.model.set_kernels(variant.kernels).set_compute_dtype(variant.dtype)
    embedder.embed_batch(sentences[:batch_size])
    start = time.perf_counter()
    for _ in embedder.embed_sentences(sentences, batch_size=batch_size, sort_batches=1):
        pass
    return sum(map(len, sentences)) / (time.perf_counter() - start)


class Variant(NamedTuple):
    """One way of running our biLM: its column label, kernel set, directions at once, compute dtype."""

    label: str
    kernels: str
    concurrent: bool
    dtype: torch.dtype


def variants() -> List[Variant]:
    """As shipped (this CPU's default kernel set), every other kernel set this machine has, the
    directions in turn, and ``compute_dtype = "auto"`` (bfloat16 where the CPU has bf16 units)."""
    default = default_kernels()
    auto = resolve_compute_dtype("auto")
    rows = [Variant(f"ours ({default}, as shipped)", default, True, torch.float32)]
    rows += [
        Variant(f"{k} kernels", k, True, torch.float32) for k in KERNELS if k != default and not unavailable_reason(k)
    ]
    rows.append(Variant("directions in turn", default, False, torch.float32))
    rows.append(Variant(f'"auto" ({str(auto).replace("torch.", "")})', default, True, auto))
    return rows


def bench(threads: Sequence[int], batch_sizes: Sequence[int], rounds: int, batches: int) -> List[Dict]:
    """One row per (threads, batch size): median tokens/s of AllenNLP and of each variant, GFLOP/s."""
    torch.manual_seed(0)
    model = BiLM(model_options(MODELS[FULL])).eval()
    python = reference_python()
    pool = [s for s in load_sentences(4000) if 20 <= len(s) <= 30]
    ways = variants()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        files = save_bilm(model, Path(tmp) / "model")
        embedder = ElmoEmbedder(files / "options.json", files / "weights.hdf5")
        for n_threads in threads:
            torch.set_num_threads(n_threads)
            for batch_size in batch_sizes:
                sentences = pool[: batch_size * batches]
                text = Path(tmp) / f"sentences_{batch_size}.txt"
                write_text_atomic(text, "\n".join(" ".join(s) for s in sentences) + "\n")
                matmul, matmul_flops = matmul_job(batch_size)
                measured: Dict[str, List[float]] = {"allennlp": [], "matmul": [], **{w.label: [] for w in ways}}
                for round_ in range(rounds):
                    print(f"  {n_threads} threads, batch {batch_size}: round {round_ + 1} of {rounds}", flush=True)
                    if python is not None:
                        measured["allennlp"].append(allennlp_tokens_per_s(python, files, text, batch_size, n_threads))
                    for way in ways:
                        measured[way.label].append(ours_tokens_per_s(embedder, sentences, batch_size, way))
                    matmul()
                    start = time.perf_counter()
                    matmul()
                    measured["matmul"].append(matmul_flops / (time.perf_counter() - start) / 1e9)
                med = {k: statistics.median(v) if v else None for k, v in measured.items()}
                flops_per_token = sum(
                    batch_flops(model.options, sentences[i : i + batch_size], 2)
                    for i in range(0, len(sentences), batch_size)
                ) / sum(map(len, sentences))
                shipped = med[ways[0].label]
                row = {
                    "threads": n_threads,
                    "batch_size": batch_size,
                    "sentences": len(sentences),
                    "rounds": rounds,
                    "allennlp": med["allennlp"],
                    "ours": {w.label: med[w.label] for w in ways},
                    "gflops": shipped * flops_per_token / 1e9,
                    "matmul_gflops": med["matmul"],
                    "all": measured,
                }
                rows.append(row)
                ratio = (
                    f", {shipped / row['allennlp']:.2f}x AllenNLP ({row['allennlp']:.0f})" if row["allennlp"] else ""
                )
                others = "; ".join(f"{w.label} {med[w.label]:.0f}" for w in ways[1:])
                print(
                    f"  {n_threads} threads, batch {batch_size}: ours {shipped:.0f} tokens/s{ratio}; {others}",
                    flush=True,
                )
    return rows


def markdown(rows: Sequence[Dict], header: str) -> str:
    """The rows as a markdown table: tokens/s and, beside AllenNLP, the ratio to it."""
    labels = list(rows[0]["ours"]) if rows else []
    lines = [
        header,
        "",
        "| threads | batch | AllenNLP tokens/s | "
        + " | ".join(f"{label} tokens/s (/ AllenNLP)" for label in labels)
        + " | GFLOP/s (as shipped) | matmul GFLOP/s (M=batch) | % of matmul |",
        "|---:|---:|---:|" + "---:|" * len(labels) + "---:|---:|---:|",
    ]
    for r in rows:
        allen = r["allennlp"]
        cells = []
        for i, label in enumerate(labels):
            value = r["ours"][label]
            ratio = f" ({'**' if i == 0 else ''}{value / allen:.2f}x{'**' if i == 0 else ''})" if allen else ""
            cells.append(f"{value:,.0f}{ratio}")
        lines.append(
            f"| {r['threads']} | {r['batch_size']} | {f'{allen:,.0f}' if allen else 'skipped'} | "
            + " | ".join(cells)
            + f" | {r['gflops']:.1f} | {r['matmul_gflops']:.1f} | {100 * r['gflops'] / r['matmul_gflops']:.0f}% |"
        )
    return "\n".join(lines) + "\n"


def cpu_flags() -> str:
    """The CPU's AVX2/AVX-512/AMX flags, as in the issue's ``grep -o -wE`` command."""
    flags = set(Path("/proc/cpuinfo").read_text().split()) if Path("/proc/cpuinfo").exists() else set()
    return (
        " ".join(sorted(f for f in flags if f == "avx2" or f.startswith(("avx512", "amx"))))
        or "none of avx2/avx512/amx"
    )


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; figures are medians")
    parser.add_argument("--batches", type=int, default=2, help="batches per timed pass")
    parser.add_argument("--output", type=Path, help="also write the markdown table here")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    print(f"torch {torch.__version__}, {cpu_vendor()} {cpu_name()} ({cpu_flags()}), {os.cpu_count()} CPUs", flush=True)
    rows = bench(args.threads, args.batch_sizes, args.rounds, args.batches)
    header = (
        f"Full-size random biLM (published 'original' architecture), exact float32, end to end (token lists to numpy), "
        f"20-30-token held-out sentences, {args.batches} batches per pass, medians of {args.rounds} interleaved rounds; "
        f"torch {torch.__version__}, {cpu_vendor()} {cpu_name()} ({cpu_flags()}), {os.cpu_count()} CPUs, 1-minute load average "
        f"{load_before:.1f} before and {os.getloadavg()[0]:.1f} after; matmul: [batch, 512] @ [512, 16384] float32 "
        f"on the {default_kernels()} kernel set."
    )
    text = markdown(rows, header)
    print(text)
    if args.output:
        write_text_atomic(args.output, text)
    if args.json:
        write_text_atomic(
            args.json,
            json.dumps({"rows": rows, "vendor": cpu_vendor(), "cpu": cpu_name(), "flags": cpu_flags()}, indent=1),
        )


if __name__ == "__main__":
    main()
