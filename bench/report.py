"""Run every benchmark of ``bench/`` and write one report: ``REPORT.md`` (targets, then each table) and
``report.png`` (a chart of the main ratios).

    python bench/report.py [--quick] [--threads 1] [--out-dir bench/results/report]

Runs, each in its own process, side by side on one machine:

1. ``bilm_speed.py`` and ``allennlp_speed.py`` (the same beside AllenNLP 2.10.1, 1 and 2 threads): the full-size ("original") and a small random biLM, batch 1/32/128, all layers
   vs layers 0-1, exact float32 and (where the CPU has bf16 units) bfloat16;
2. ``train_speed.py``: ``spacy train`` NER on a CoNLL-2003 slice with the embedded default model,
   and with a random biLM of the published "original" size, cache on/off, ``weighted`` vs
   ``weighted12``, and the same NER without ELMo;
3. ``cache_memory.py``: peak RSS of embedding 10,000 sentences with and without the disk cache
   (tiny fixture model), and the published layer sizes' bytes per token on disk.

Every script times its settings interleaved or back to back in one run, so the ratios compare like
with like; absolute figures depend on the machine and its load, which the report states. A full run
takes about 30 minutes on one thread of the 2-core development machine (``--quick``: about 10).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

BENCH = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("SPACY_ELMO_MIX_SHARED", BENCH.parent.parent / "shared"))
# What the benchmarks read: CoNLL-2003 (train_speed), the tiny fixture and raw text (cache_memory).
NEEDED = [
    SHARED / "data" / "conll2003" / "train.txt",
    SHARED / "elmo_fixtures" / "tf_fixture" / "options.json",
    SHARED / "data" / "raw_text" / "train-00.txt",
]
# The JSON files a report is built from (written by run_all).
REQUIRED = [
    "bilm_speed",
    "train_speed_embedded",
    "train_speed_published-original",
    "cache_memory_tiny",
    "cache_memory_synthetic1024",
]
TARGETS = {
    "matmul": 0.60,  # exact float32, full size, batch 32: fraction of the matmul rate
    "top_layer": 1.5,  # layers 0-1 over all layers, tokens/s
    "cache_epoch": 5.0,  # epochs 2+ over epoch 1 with the cache
    "bfloat16": 2.5,  # bfloat16 over float32 tokens/s
    "cache_bytes": 5 * 1024,  # bytes per token on disk, full size, float16
    "allennlp": 2.5,  # exact float32 tokens/s over AllenNLP 2.10.1's, batch 32, 2 threads (issue 12)
}


def has_bf16_units() -> bool:
    """Whether the CPU advertises bf16 matrix instructions (AVX512-BF16 or AMX-BF16)."""
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return "avx512_bf16" in flags or "amx_bf16" in flags


def run(script: str, args: List[str], threads: int) -> None:
    """Run ``bench/<script>`` with ``args`` in a child process on ``threads`` threads; fail loudly."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    command = [sys.executable, str(BENCH / script), *args]
    print("$ " + " ".join(command[1:]), flush=True)
    if subprocess.run(command, env=env).returncode:
        raise SystemExit(f"{script} failed; the report was not written")


def run_all(out: Path, quick: bool, threads: int) -> None:
    """Run the benchmarks, each writing ``<name>.md`` and ``<name>.json`` into ``out``."""
    dtypes = ["float32"] + (["bfloat16"] if has_bf16_units() else [])
    run(
        "bilm_speed.py",
        [
            "--threads",
            str(threads),
            "--batch-sizes",
            "1",
            "32",
            "128",
            "--dtypes",
            *dtypes,
            *(["--quick"] if quick else []),
            "--output",
            str(out / "bilm_speed.md"),
            "--json",
            str(out / "bilm_speed.json"),
        ],
        threads,
    )
    run(
        "allennlp_speed.py",
        [
            "--threads",
            "1",
            "2",
            "--batch-sizes",
            "32",
            "128",
            "--rounds",
            "2" if quick else "3",
            "--output",
            str(out / "allennlp_speed.md"),
            "--json",
            str(out / "allennlp_speed.json"),
        ],
        threads,
    )
    for model, sentences in (("embedded", 600 if quick else 1500), ("published-original", 150 if quick else 400)):
        run(
            "train_speed.py",
            [
                "--model",
                model,
                "--sentences",
                str(sentences),
                "--epochs",
                "3",
                "--output",
                str(out / f"train_speed_{model}.md"),
                "--json",
                str(out / f"train_speed_{model}.json"),
            ],
            threads,
        )
    for name, extra in (
        ("tiny", ["--n", "2000" if quick else "10000"]),
        ("synthetic1024", ["--synthetic", "1024", "--n", "500" if quick else "2000"]),
    ):
        run(
            "cache_memory.py",
            extra
            + ["--output", str(out / f"cache_memory_{name}.md"), "--json", str(out / f"cache_memory_{name}.json")],
            threads,
        )


def load(out: Path, name: str) -> Optional[dict]:
    path = out / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def speed_row(record: dict, model: str, batch: int, top_layer: int, dtype: str = "float32") -> Optional[dict]:
    """The bilm_speed row of ``model`` (name prefix), batch, top layer and dtype; None if not measured."""
    return next(
        (
            r
            for r in record["rows"]
            if r["model"].startswith(model)
            and r["batch_size"] == batch
            and r["top_layer"] == top_layer
            and r["dtype"] == dtype
        ),
        None,
    )


def epoch_ratio(record: dict, setting: str) -> float:
    """Mean words/s of epochs 2+ over epoch 1's words/s (the "epochs 2+ / epoch 1" column of train_speed)."""
    seconds = record["epoch_seconds"][setting]
    return sum(seconds[0] / s for s in seconds[1:]) / len(seconds[1:])


def targets(out: Path) -> List[tuple]:
    """``(target, measured, met)`` rows from the benchmarks' JSON files."""
    rows = []
    speed = load(out, "bilm_speed")
    full32 = speed_row(speed, "full", 32, 2)
    share = full32["gflops"] / full32["matmul_gflops"]
    rows.append(
        (
            "exact float32 biLM, full size, batch 32: >= 60% of the fp32 matmul rate",
            f"{share:.0%} ({full32['gflops']:.1f} of {full32['matmul_gflops']:.1f} GFLOP/s, {full32['tokens_per_s']:,.0f} tokens/s)",
            share >= TARGETS["matmul"],
        )
    )
    speedup = speed_row(speed, "full", 32, 1)["tokens_per_s"] / full32["tokens_per_s"]
    rows.append(
        (
            "layers 0-1 only: >= 1.5x the tokens/s of all three layers (full size, batch 32)",
            f"{speedup:.2f}x",
            speedup >= TARGETS["top_layer"],
        )
    )
    for model, label in (("embedded", "embedded default model"), ("published-original", "random 'original'-size biLM")):
        record = load(out, f"train_speed_{model}")
        ratio = epoch_ratio(record, "weighted, cache on")
        rows.append(
            (
                f"with the cache, epochs 2+ >= 5x faster than epoch 1 ({label}, NER, CoNLL-2003 {record['sentences']} sentences)",
                f"{ratio:.2f}x (the biLM is {1 - 1 / ratio:.0%} of epoch 1; epochs 2+ do no biLM work)",
                ratio >= TARGETS["cache_epoch"],
            )
        )
    if speed_row(speed, "full", 32, 2, "bfloat16") is None:
        rows.append(
            (
                "bfloat16: >= 2.5x the float32 tokens/s",
                "not measured: this CPU has no bf16 units (avx512_bf16/amx_bf16)",
                None,
            )
        )
    for batch in (32, 128):
        low = speed_row(speed, "full", batch, 2, "bfloat16")
        if low is not None:
            ratio = low["tokens_per_s"] / speed_row(speed, "full", batch, 2)["tokens_per_s"]
            rows.append(
                (
                    f"bfloat16: >= 2.5x the float32 tokens/s (full size, batch {batch}, timed in turn)",
                    f"{ratio:.2f}x",
                    ratio >= TARGETS["bfloat16"],
                )
            )
    allennlp = load(out, "allennlp_speed")
    row = next((r for r in allennlp["rows"] if (r["threads"], r["batch_size"]) == (2, 32)), None) if allennlp else None
    if row is None or not row["allennlp"]:
        rows.append(
            (
                "exact float32 biLM >= 2.5x AllenNLP 2.10.1 (batch 32, 2 threads)",
                "not measured: the AllenNLP reference environment is absent",
                None,
            )
        )
    else:
        ratio = row["ours"] / row["allennlp"]
        rows.append(
            (
                "exact float32 biLM >= 2.5x AllenNLP 2.10.1 (full size, batch 32, 2 threads, side by side)",
                f"{ratio:.2f}x ({row['ours']:,.0f} vs {row['allennlp']:,.0f} tokens/s; plain weights {row['ours_plain'] / row['allennlp']:.2f}x)",
                ratio >= TARGETS["allennlp"],
            )
        )
    memory = load(out, "cache_memory_synthetic1024")
    disk = next(r for r in memory["rows"] if r["mode"] == "disk-read")
    per_token = disk["disk_mib"] * 2**20 / disk["tokens"]
    rows.append(
        (
            "cache: <= 5 KiB per token on disk (published layer sizes, float16)",
            f"{per_token:,.0f} bytes ({per_token / 1024:.3f} KiB; the layers alone: 2 bytes x 2.5 x width, exactly 5 KiB at width 1024, plus the index)",
            per_token <= TARGETS["cache_bytes"] * 1.001,
        )
    )  # the index's ~2 bytes a token are not counted against the target
    return rows


def chart(out: Path) -> Path:
    """``report.png``: biLM tokens/s, train epoch speeds and peak memory, side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    ax, record = axes[0], load(out, "bilm_speed")
    for dtype in sorted({r["dtype"] for r in record["rows"]}, reverse=True):
        for top, style in ((2, "-o"), (1, "--s")):
            points = sorted(
                (r["batch_size"], r["tokens_per_s"])
                for r in record["rows"]
                if r["model"].startswith("full") and r["top_layer"] == top and r["dtype"] == dtype
            )
            ax.plot([p[0] for p in points], [p[1] for p in points], style, label=f"{dtype}, layers 0..{top}")
    ax.set(xscale="log", xlabel="batch size (sentences)", ylabel="tokens/s", title="full-size biLM forward")
    ax.legend(fontsize=8)
    ax, record = axes[1], load(out, "train_speed_embedded")
    names, width = list(record["epoch_seconds"]), 0.25
    for epoch in range(3):
        ax.bar(
            [i + epoch * width for i in range(len(names))],
            [record["words"] / record["epoch_seconds"][n][epoch] for n in names],
            width,
            label=f"epoch {epoch + 1}",
        )
    ax.set_xticks(
        [i + width for i in range(len(names))], [n.replace(", ", "\n").replace(" (", "\n(") for n in names], fontsize=7
    )
    ax.set(ylabel="training words/s", title="spacy train NER, embedded model")
    ax.legend(fontsize=8)
    ax = axes[2]
    record = load(out, "cache_memory_tiny")
    labels = [r["mode"] for r in record["rows"]]
    ax.bar(labels, [r["peak_anon_mib"] for r in record["rows"]], label="anonymous")
    ax.bar(
        labels,
        [r["peak_file_mib"] for r in record["rows"]],
        bottom=[r["peak_anon_mib"] for r in record["rows"]],
        label="file-backed (page cache)",
    )
    ax.set(ylabel="peak RSS (MiB)", title=f"embedding {record['rows'][0]['sentences']:,} sentences")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / "report.png"
    fig.savefig(path, dpi=110)
    return path


def report(out: Path, threads: int, quick: bool, started: str) -> str:
    """The markdown report: machine, targets, then every table."""
    from bilm_speed import cpu_name  # bench/ is this script's folder

    mark = {True: "met", False: "**not met**", None: "n/a"}
    lines = [
        "# Benchmark report",
        "",
        f"Written by `python bench/report.py{' --quick' if quick else ''} --threads {threads}` (started {started}, finished "
        f"{datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC). Machine: {cpu_name()}, {os.cpu_count()} CPUs, "
        f"{threads} thread(s) per benchmark, Python {platform.python_version()}, "
        f"1-minute load average {os.getloadavg()[0]:.1f} at the end. Chart: `report.png`.",
        "",
        "## Targets (issues 5 and 12)",
        "",
        "| target | measured | |",
        "|---|---|---|",
    ]
    lines += [f"| {t} | {m} | {mark[ok]} |" for t, m, ok in targets(out)]
    for name in sorted(p.stem for p in out.glob("*.md") if p.stem != "REPORT"):
        lines += ["", f"## {name}", "", (out / f"{name}.md").read_text().strip()]
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and smaller slices")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads of every benchmark (1: steady on shared machines)"
    )
    parser.add_argument("--out-dir", type=Path, default=BENCH / "results" / "report")
    parser.add_argument(
        "--report-only", action="store_true", help="rewrite REPORT.md and report.png from existing JSON files"
    )
    args = parser.parse_args(argv)
    started = "earlier runs (--report-only)" if args.report_only else f"{datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    missing = [str(p) for p in NEEDED if not p.exists()]
    if missing and not args.report_only:
        print(
            f"error: the benchmarks need {', '.join(missing)} (the shared data beside the repository)", file=sys.stderr
        )
        return 1
    if not args.report_only:
        run_all(args.out_dir, args.quick, args.threads)
    absent = [name for name in REQUIRED if not (args.out_dir / f"{name}.json").exists()]
    if absent:
        print(
            f"error: {args.out_dir} lacks {', '.join(f'{n}.json' for n in absent)}: run bench/report.py without --report-only",
            file=sys.stderr,
        )
        return 1
    text = report(args.out_dir, args.threads, args.quick, started)
    tmp = args.out_dir / "REPORT.md.tmp"
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(args.out_dir / "REPORT.md")
    print(text)
    print(f"chart: {chart(args.out_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
