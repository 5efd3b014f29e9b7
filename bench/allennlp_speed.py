"""Our biLM against AllenNLP 2.10.1's, side by side in one run: tokens/s, the ratio, GFLOP/s.

Both embed the same sentences (20-30 tokens, from the held-out raw text) with the same random
published "original"-size model (4096 cells, 512 projection, 2048 char filters, written once as
bilm-tf files), end to end from token lists to numpy arrays: AllenNLP's stateless ``_ElmoBiLm``
(``../shared/tools/allennlp_reference/allennlp_elmo.py speed``) against ``ElmoEmbedder.embed_sentences``.
Each side runs in a fresh process with the same torch thread count (``OMP_NUM_THREADS`` and
``torch.set_num_threads``), warm-up then the best of ``--repeats`` passes, as the reference script
times itself; the two alternate for ``--rounds`` rounds so both see the same machine load, and the
table gives medians over rounds. Our process also times the recurrent GEMM ``[batch, 512] x
[512, 16384]`` (the machine's fp32 matmul rate at that shape) beside the model, for GFLOP/s.

The AllenNLP rows need its reference environment (``setup.sh`` there; default location
``~/allennlp-reference``, or ``--reference DIR``); where it is absent they are skipped with a message
and our figures are still reported.

Usage: ``python bench/allennlp_speed.py [--threads 1 2] [--batch-sizes 32 128] [--rounds 3] [--json F]``
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bilm_speed import MODELS, SHARED, batch_flops, cpu_name, load_sentences, matmul_job, model_options  # noqa: E402

REFERENCE_SCRIPT = SHARED / "tools" / "allennlp_reference" / "allennlp_elmo.py"
FULL = "full (4096/512, 2048 filters)"


def cpu_flags() -> str:
    """The vector-unit flags of this CPU that decide its kernels (AVX2, AVX-512, bf16, AMX)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    flags = set(next((l.split(":", 1)[1].split() for l in text.splitlines() if l.startswith("flags")), []))
    wanted = sorted(f for f in flags if f in ("avx2", "fma") or f.startswith(("avx512", "amx")))
    return " ".join(wanted) or "no AVX2"


def write_inputs(directory: Path, n_sentences: int) -> None:
    """The random full-size model as ``options.json`` + ``weights.hdf5`` and ``sentences.txt`` in ``directory``."""
    from spacy_elmo_mix.bilm.loading import save_bilm
    from spacy_elmo_mix.bilm.modules import BiLM

    torch.manual_seed(0)
    save_bilm(BiLM(model_options(MODELS[FULL])), directory)
    pool = [s for s in load_sentences(20 * n_sentences) if 20 <= len(s) <= 30]
    (directory / "sentences.txt").write_text("\n".join(" ".join(s) for s in pool[:n_sentences]) + "\n", encoding="utf-8")


def ours(directory: Path, batch_size: int, threads: int, repeats: int) -> Dict[str, float]:
    """Our side of one round (run in its own process): tokens/s, GFLOP/s and the matmul rate."""
    from spacy_elmo_mix.bilm.embedder import ElmoEmbedder

    torch.set_num_threads(threads)
    sentences = [l.split() for l in (directory / "sentences.txt").read_text(encoding="utf-8").splitlines() if l.strip()]
    embedder = ElmoEmbedder(directory / "options.json", directory / "weights.hdf5")
    run = lambda: list(embedder.embed_sentences(sentences, batch_size=batch_size))  # noqa: E731
    run()  # warm-up
    best = min(_seconds(run) for _ in range(repeats))
    matmul, matmul_flops = matmul_job(batch_size)
    matmul()
    matmul_seconds = min(_seconds(matmul) for _ in range(repeats))
    batches = [sentences[i : i + batch_size] for i in range(0, len(sentences), batch_size)]
    flops = sum(batch_flops(embedder.model.options, b, embedder.model.options.lstm.n_layers) for b in batches)
    n_tokens = sum(map(len, sentences))
    return {"tokens_per_s": n_tokens / best, "gflops": flops / best / 1e9, "matmul_gflops": matmul_flops / matmul_seconds / 1e9}


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def reference_python(directory: Optional[Path]) -> Optional[List[str]]:
    """The command prefix running the AllenNLP reference environment, or None where it is absent."""
    root = directory or Path(os.environ.get("ALLENNLP_REFERENCE", Path.home() / "allennlp-reference"))
    python = root / "venv" / "bin" / "python"
    if not (python.exists() and REFERENCE_SCRIPT.exists()):
        return None
    return ["env", f"PYTHONPATH={root / 'shims'}", str(python), str(REFERENCE_SCRIPT)]


def run_json(command: Sequence[str], threads: int) -> Dict[str, float]:
    """Run ``command`` with ``threads`` OpenMP threads and parse the JSON of its last output line."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    done = subprocess.run(list(command), env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(directory: Path, reference: Optional[List[str]], threads: int, batch_size: int, rounds: int, repeats: int) -> Dict[str, object]:
    """One table row: both implementations alternating for ``rounds`` rounds; medians over rounds."""
    ours_command = [sys.executable, __file__, "--ours", str(directory), "--threads", str(threads),
                    "--batch-sizes", str(batch_size), "--repeats", str(repeats)]
    theirs_command = (reference or []) + ["speed", "--options", str(directory / "options.json"), "--weights",
                                          str(directory / "weights.hdf5"), "--sentences", str(directory / "sentences.txt"),
                                          "--batch-size", str(batch_size), "--threads", str(threads), "--repeats", str(repeats)]
    ours_runs, theirs_runs = [], []
    for _ in range(rounds):
        if reference:
            theirs_runs.append(run_json(theirs_command, threads)["tokens_per_s"])
        ours_runs.append(run_json(ours_command, threads))
    row: Dict[str, object] = {"threads": threads, "batch_size": batch_size}
    for key in ("tokens_per_s", "gflops", "matmul_gflops"):
        row[key] = statistics.median(r[key] for r in ours_runs)
    if theirs_runs:
        row["allennlp_tokens_per_s"] = statistics.median(theirs_runs)
        row["ratio"] = statistics.median(o["tokens_per_s"] / t for o, t in zip(ours_runs, theirs_runs))
    print(f"  threads={threads} batch={batch_size}: ours {row['tokens_per_s']:.0f} tokens/s"
          + (f", AllenNLP {row['allennlp_tokens_per_s']:.0f}, ratio {row['ratio']:.2f}x" if theirs_runs else ""), flush=True)
    return row


def markdown(rows: Sequence[Dict[str, object]], header: str) -> str:
    lines = [header, "", "| threads | batch | AllenNLP tokens/s | ours tokens/s | ours / AllenNLP | ours GFLOP/s | "
             "matmul GFLOP/s (M=batch) | % of matmul |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        theirs = f"{r['allennlp_tokens_per_s']:,.0f}" if "ratio" in r else "n/a"
        ratio = f"**{r['ratio']:.2f}x**" if "ratio" in r else "n/a"
        lines.append(f"| {r['threads']} | {r['batch_size']} | {theirs} | {r['tokens_per_s']:,.0f} | {ratio} | "
                     f"{r['gflops']:.1f} | {r['matmul_gflops']:.1f} | {100 * r['gflops'] / r['matmul_gflops']:.0f}% |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--sentences", type=int, default=128, help="sentences of 20-30 tokens per pass")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (medians are reported)")
    parser.add_argument("--repeats", type=int, default=2, help="timed passes per process (the best counts)")
    parser.add_argument("--quick", action="store_true", help="1 round, 64 sentences")
    parser.add_argument("--reference", type=Path, help="the AllenNLP reference folder (default ~/allennlp-reference)")
    parser.add_argument("--output", type=Path, help="also write the markdown table here")
    parser.add_argument("--json", type=Path, help="also write the rows (and the run's settings) as JSON here")
    parser.add_argument("--ours", type=Path, help=argparse.SUPPRESS)  # internal: one round of our side
    args = parser.parse_args(argv)
    if args.ours:
        print(json.dumps(ours(args.ours, args.batch_sizes[0], args.threads[0], args.repeats)))
        return
    if args.quick:
        args.rounds, args.sentences = 1, 64
    reference = reference_python(args.reference)
    if reference is None:
        print("AllenNLP reference environment not found (see ../shared/tools/allennlp_reference/README.md): "
              "its rows are skipped, only our figures are measured")
    load_before = os.getloadavg()[0]
    print(f"torch {torch.__version__}, {cpu_name()} ({os.cpu_count()} CPUs; flags: {cpu_flags()})")
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        write_inputs(directory, args.sentences)
        rows = [measure(directory, reference, t, b, args.rounds, args.repeats) for t in args.threads for b in args.batch_sizes]
    header = (f"Side by side with AllenNLP 2.10.1, exact float32, random published \"original\"-size biLM, {args.sentences} "
              f"sentences of 20-30 tokens, end to end (token lists to numpy arrays); torch {torch.__version__}, "
              f"{cpu_name()} ({os.cpu_count()} CPUs; flags: {cpu_flags()}; 1-minute load average {load_before:.1f} before, "
              f"{os.getloadavg()[0]:.1f} after); each side in its own process, best of {args.repeats} passes after a "
              f"warm-up, alternating for {args.rounds} round(s), medians over rounds.")
    table = markdown(rows, header)
    print(table)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(table, encoding="utf-8")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        record = {"cpu": cpu_name(), "flags": cpu_flags(), "header": header, "rows": rows,
                  "allennlp": reference is not None}
        args.json.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
