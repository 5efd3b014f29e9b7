"""Speed of the native biLM's exact float32 forward pass, beside the machine's matmul rate.

For a full-size random model (the published "original" ELMo architecture) and a small one, at batch
sizes 1, 32 and 128, with all layers and with ``top_layer=1``, this measures tokens per second of
``BiLM.forward`` under ``torch.inference_mode`` (character ids are prepared beforehand), the achieved
GFLOP/s (FLOPs counted analytically, see :func:`batch_flops`) and the measured fp32 GFLOP/s of the
recurrent GEMM shape ``M x 512 @ 512 x 16384`` at ``M = batch size`` on the CPU's default kernel
set. Every figure is the median of several repetitions after a warm-up, the model and the matmul
timed in turn so that both see the same machine load. Torch's default thread count is used unless ``--threads`` says otherwise.

Usage: ``python bench/bilm_speed.py [--quick] [--output bench/results/bilm_speed.md]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

from spacy_elmo_mix.bilm import BiLM, BiLMOptions, batch_to_char_ids
from spacy_elmo_mix.bilm.kernels import PACKED_KERNELS, default_kernels, prepacked, step_product

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SPACY_ELMO_MIX_SHARED", REPO.parent / "shared"))
HELDOUT = SHARED / "data" / "raw_text" / "heldout.txt"
MATMUL_K, MATMUL_N = 512, 16384
MODELS = {
    "full (4096/512, 2048 filters)": {
        "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
        "char_dim": 16,
        "dim": 4096,
        "projection_dim": 512,
        "sentences": 8,
    },
    "small (1024/128, 496 filters)": {
        "filters": [[1, 16], [2, 16], [3, 32], [4, 64], [5, 128], [6, 240]],
        "char_dim": 16,
        "dim": 1024,
        "projection_dim": 128,
        "sentences": 32,
    },
    # The shipped default model's own files (trained weights), not a random model.
    "embedded (512/128, 512 filters)": {"files": "default", "sentences": 32},
}
CHAR_CACHE_SENTENCES = {"full": 64, "embedded": 512, "small": 256}


def model_options(spec: dict) -> BiLMOptions:
    """Options of a 2-layer biLM with clipping at 3 and ``spec``'s sizes.

    spec: ``filters`` ([width, n] pairs), ``char_dim``, ``dim`` (LSTM cells), ``projection_dim``,
    ``n_highway`` (default 2).
    """
    return BiLMOptions.from_dict(
        {
            "lstm": {
                "dim": spec["dim"],
                "projection_dim": spec["projection_dim"],
                "n_layers": 2,
                "cell_clip": 3,
                "proj_clip": 3,
                "use_skip_connections": True,
            },
            "char_cnn": {
                "filters": spec["filters"],
                "n_highway": spec.get("n_highway", 2),
                "embedding": {"dim": spec["char_dim"]},
                "n_characters": 262,
                "max_characters_per_token": 50,
                "activation": "relu",
            },
        },
        source="bench",
    )


def load_sentences(count: int, seed: int = 0) -> List[List[str]]:
    """``count`` whitespace-tokenized sentences of 5-60 tokens from the held-out raw text.

    Falls back to synthetic sentences (random lowercase words, 10-40 tokens) when the file is absent.
    """
    if HELDOUT.exists():
        lines = [line.split() for line in HELDOUT.read_text(encoding="utf-8").splitlines()]
        pool = [s for s in lines if 5 <= len(s) <= 60]
        return [pool[i % len(pool)] for i in range(count)]
    rng = random.Random(seed)

    def word() -> str:
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 10)))

    return [[word() for _ in range(rng.randint(10, 40))] for _ in range(count)]


def batch_flops(options: BiLMOptions, batch: Sequence[Sequence[str]], top_layer: int) -> float:
    """Forward FLOPs (2 per multiply-add) that ``BiLM.forward`` executes on ``batch``.

    The char-CNN (convolutions, highway, projection) runs once per distinct word of the batch,
    ``<S>``/``</S>`` included, as the model does; each of the ``2 * top_layer`` LSTMs costs its input,
    recurrent and projection GEMMs at every position, sentence markers included. Element-wise work
    (gates, clipping, max-pooling) is not counted.
    """
    cnn, lstm = options.char_cnn, options.lstm
    n_filters = cnn.n_filters
    conv = sum((cnn.max_characters_per_token - w + 1) * w * cnn.char_embedding_dim * n for w, n in cnn.filters)
    highway = cnn.n_highway * n_filters * 2 * n_filters
    token_macs = conv + highway + n_filters * lstm.projection_dim
    gates = 4 * lstm.dim
    lstm_macs = 2 * lstm.projection_dim * gates + lstm.dim * lstm.projection_dim
    distinct = len({w for s in batch for w in s} | {"<S>", "</S>"})
    positions = sum(len(s) + 2 for s in batch)
    return 2.0 * (distinct * token_macs + 2 * top_layer * positions * lstm_macs)


def interleaved_medians(fns: Dict[str, Callable[[], object]], warmup: int, reps: int) -> Dict[str, float]:
    """Median wall time of each function, timed in turn ``reps`` times after ``warmup`` untimed rounds.

    Interleaving puts every function under the same machine load (shared cores are noisy).
    """
    times: Dict[str, List[float]] = {name: [] for name in fns}
    for round_ in range(warmup + reps):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            if round_ >= warmup:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def matmul_job(m: int) -> Tuple[Callable[[], None], float]:
    """A function running ``[m, 512] @ [512, 16384]`` float32 products (the full model's recurrent
    GEMM) as the biLM runs them, on this CPU's default kernel set (packed weights where the set packs
    them: on AMD CPUs torch's plain product runs at half of that rate), and its FLOPs."""
    kernels = default_kernels()
    a, w = torch.randn(m, MATMUL_K), torch.randn(MATMUL_N, MATMUL_K)
    pack = prepacked(w, m, torch.float32, kernels) if kernels in PACKED_KERNELS else None
    inner = max(1, 256 // m)  # several products per timing so that small M is measurable

    def run() -> None:
        for _ in range(inner):
            step_product(a, w.t(), None, pack, kernels)

    return run, 2.0 * m * MATMUL_K * MATMUL_N * inner


@dataclass
class Row:
    """One line of the results table (rates are medians over the repetitions)."""

    model: str
    batch_size: int
    top_layer: int
    dtype: str
    tokens_per_s: float
    gflops: float
    matmul_gflops: float


def build_model(spec: dict, dtype: torch.dtype) -> BiLM:
    """The benchmarked biLM: random weights of ``spec``'s sizes, or the embedded default model."""
    if spec.get("files") == "default":
        from spacy_elmo_mix.bilm.loading import load_bilm
        from spacy_elmo_mix.default_model import default_model_files

        model = load_bilm(*default_model_files())
    else:
        torch.manual_seed(0)
        model = BiLM(model_options(spec))
    return model.eval().set_compute_dtype(dtype)


def bench_model(
    name: str, spec: dict, batch_sizes: Sequence[int], warmup: int, reps: int, dtypes: Sequence[str] = ("float32",)
) -> List[Row]:
    """Rows for one model: every batch size and compute dtype, all layers and ``top_layer=1``.

    spec: the model's sizes (see :data:`MODELS`), with ``sentences``: at least how many sentences one
    timed repetition processes (whole batches). The matmul reference and every dtype are timed
    interleaved (one model, its compute dtype switched before each call).
    """
    model = build_model(spec, torch.float32)
    options = model.options
    top_layers = (options.lstm.n_layers, 1)
    rows = []
    for batch_size in batch_sizes:
        n_batches = -(-spec["sentences"] // batch_size)
        sentences = load_sentences(batch_size * n_batches)
        batches = [sentences[i : i + batch_size] for i in range(0, len(sentences), batch_size)]
        inputs = [(torch.from_numpy(batch_to_char_ids(b)), torch.tensor([len(s) for s in b])) for b in batches]
        n_tokens = sum(len(s) for s in sentences)

        def run(dtype: str, top: int, inputs=inputs) -> Callable[[], None]:
            def call() -> None:
                model.set_compute_dtype(getattr(torch, dtype))
                with torch.inference_mode():
                    for ids, lengths in inputs:
                        model(ids, lengths, top_layer=top)

            return call

        matmul, matmul_flops = matmul_job(batch_size)
        settings = [(dtype, top) for dtype in dtypes for top in top_layers]
        seconds = interleaved_medians({"matmul": matmul, **{k: run(*k) for k in settings}}, warmup, reps)
        for dtype, top in settings:
            flops = sum(batch_flops(options, b, top) for b in batches)
            rate = n_tokens / seconds[dtype, top]
            rows.append(
                Row(
                    name,
                    batch_size,
                    top,
                    dtype,
                    rate,
                    flops / seconds[dtype, top] / 1e9,
                    matmul_flops / seconds["matmul"] / 1e9,
                )
            )
            print(f"  {name} B={batch_size} {dtype} top_layer={top}: {rate:.0f} tokens/s", flush=True)
    return rows


def bench_char_cache(
    name: str, spec: dict, n_sentences: int, batch_size: int, warmup: int, reps: int
) -> Dict[str, float]:
    """tokens/s of one pass over ``n_sentences`` held-out sentences (batches of ``batch_size``, all
    layers, float32) without and with the char-CNN token-vector cache, emptied at the start of every
    pass, timed in turn; and the cache's hit rate over a pass."""
    from spacy_elmo_mix.bilm.token_cache import TokenVectorCache

    model = build_model(spec, torch.float32)
    sentences = load_sentences(n_sentences)
    inputs = [
        (torch.from_numpy(batch_to_char_ids(b)), torch.tensor([len(s) for s in b]))
        for b in (sentences[i : i + batch_size] for i in range(0, len(sentences), batch_size))
    ]
    cache = TokenVectorCache(100_000)

    def one_pass(token_cache) -> Callable[[], None]:
        def call() -> None:
            cache.clear()
            model.token_cache = token_cache
            with torch.inference_mode():
                for ids, lengths in inputs:
                    model(ids, lengths)

        return call

    seconds = interleaved_medians({"off": one_pass(None), "on": one_pass(cache)}, warmup, reps)
    n_tokens = sum(len(s) for s in sentences)
    result = {
        "model": name,
        "sentences": n_sentences,
        "batch_size": batch_size,
        "tokens_per_s_off": n_tokens / seconds["off"],
        "tokens_per_s_on": n_tokens / seconds["on"],
        "hit_rate": cache.hits / max(1, cache.hits + cache.misses),
    }
    print(
        f"  {name} char cache: {result['tokens_per_s_off']:.0f} -> {result['tokens_per_s_on']:.0f} tokens/s", flush=True
    )
    return result


def cpu_name() -> str:
    """The CPU model from ``/proc/cpuinfo`` (or the platform's machine type)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def markdown(rows: Sequence[Row], header: str) -> str:
    """The results as a markdown table, with the top_layer=1 / all-layers speed ratio (same dtype)
    and the bfloat16 / float32 ratio (same layers) per setting."""
    lines = [
        header,
        "",
        "| model | batch | precision | layers | tokens/s | GFLOP/s | matmul GFLOP/s (M=batch) | % of matmul | "
        "top_layer=1 speed-up | bfloat16 speed-up |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    by_key = {(r.model, r.batch_size, r.dtype, r.top_layer): r for r in rows}
    for r in rows:
        layers = "0..1 (top_layer=1)" if r.top_layer == 1 else f"all (0..{r.top_layer})"
        full_layers = next(
            x for x in rows if (x.model, x.batch_size, x.dtype) == (r.model, r.batch_size, r.dtype) and x.top_layer != 1
        )
        top_ratio = f"{r.tokens_per_s / full_layers.tokens_per_s:.2f}x" if r.top_layer == 1 else ""
        exact = by_key.get((r.model, r.batch_size, "float32", r.top_layer))
        dtype_ratio = f"{r.tokens_per_s / exact.tokens_per_s:.2f}x" if r.dtype != "float32" and exact else ""
        lines.append(
            f"| {r.model} | {r.batch_size} | {r.dtype} | {layers} | {r.tokens_per_s:,.0f} | {r.gflops:.1f} | "
            f"{r.matmul_gflops:.1f} | {100 * r.gflops / r.matmul_gflops:.0f}% | {top_ratio} | {dtype_ratio} |"
        )
    return "\n".join(lines) + "\n"


def char_cache_markdown(results: Sequence[Dict[str, float]]) -> str:
    lines = [
        "",
        "Char-CNN token-vector cache (`ElmoEmbedder(token_cache_size=...)`), all layers, one pass over a stream of "
        "held-out sentences with the cache empty at its start (words repeat across batches, not within one: a batch's "
        "words are always deduplicated):",
        "",
        "| model | sentences | batch | tokens/s, cache off | tokens/s, cache on | speed-up | hit rate |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['model']} | {r['sentences']} | {r['batch_size']} | {r['tokens_per_s_off']:,.0f} | "
            f"{r['tokens_per_s_on']:,.0f} | {r['tokens_per_s_on'] / r['tokens_per_s_off']:.2f}x | {r['hit_rate']:.0%} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 repetitions instead of 5")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32, 128])
    parser.add_argument("--models", nargs="+", choices=["full", "small", "embedded"], default=["full", "embedded"])
    parser.add_argument(
        "--no-char-cache", action="store_true", help="skip the char-CNN token cache comparison (batch 32)"
    )
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's default)")
    parser.add_argument("--output", type=Path, help="also write the markdown table to this file")
    parser.add_argument(
        "--dtypes",
        nargs="+",
        choices=["float32", "bfloat16"],
        default=["float32"],
        help="compute dtypes of convolutions and matmuls (BiLM.set_compute_dtype), timed in turn",
    )
    parser.add_argument("--json", type=Path, help="also write the rows (and the run's settings) as JSON here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    warmup, reps = (1, 2) if args.quick else (1, 5)
    load_before = os.getloadavg()[0]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {cpu_name()}, {os.cpu_count()} CPUs")
    rows, char_cache = [], []
    for key in args.models:
        name = next(n for n in MODELS if n.startswith(key))
        rows += bench_model(name, MODELS[name], args.batch_sizes, warmup, reps, args.dtypes)
        if not args.no_char_cache:
            char_cache.append(bench_char_cache(name, MODELS[name], CHAR_CACHE_SENTENCES[key], 32, warmup, reps))
    source = "held-out raw text" if HELDOUT.exists() else "synthetic words"
    precision = " and ".join(
        {"float32": "exact float32", "bfloat16": "bfloat16 (convolutions and matmuls; float32 cell state and outputs)"}[
            d
        ]
        for d in args.dtypes
    )
    header = (
        f"biLM forward, {precision}{', timed in turn' if len(args.dtypes) > 1 else ''}, torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"{cpu_name()} ({os.cpu_count()} CPUs; 1-minute load average {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after); sentences of 5-60 tokens ({source}); medians of {reps} "
        f"repetitions after {warmup} warm-up{' (--quick)' if args.quick else ''}. GFLOP/s: analytic forward "
        "FLOPs (char-CNN once per distinct word of a batch, LSTM GEMMs at every position including <S> and </S>) "
        f"per second; matmul: [batch, 512] @ [512, 16384] fp32 on the {default_kernels()} kernel set, timed in turn with the model."
    )
    table = markdown(rows, header) + (char_cache_markdown(char_cache) if char_cache else "")
    print(table)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(table, encoding="utf-8")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "dtypes": args.dtypes,
            "threads": torch.get_num_threads(),
            "cpu": cpu_name(),
            "header": header,
            "rows": [asdict(r) for r in rows],
            "char_cache": char_cache,
        }
        args.json.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
