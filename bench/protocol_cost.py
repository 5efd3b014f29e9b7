"""What the paper's protocol costs per data set: the time of one training epoch and one dev
evaluation of the BiLSTM-CRF (``configs/crf_ner.cfg`` / ``crf_tagger.cfg``, scheme ``weighted``, the
layer cache filled, one thread), and the projected cost of a run and of a grid.

A converged run takes ``epochs x (epoch + dev evaluation)``; the epochs come from the finished runs
of that data set in ``--results`` (mean over them) or, without any, from ``--assume-epochs``. Run from
the repository root after the project's ``convert`` and ``cache`` steps::

    python bench/protocol_cost.py --datasets ud_ewt wnut16 conll2000 conll2003 --output bench/results/protocol_cost.md
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import spacy
import torch
from spacy.training import Corpus
from spacy.util import load_config, minibatch

from allennlp_speed import cpu_flags
from bilm_speed import cpu_name
from spacy_elmo_mix.atomic import write_text_atomic
from spacy_elmo_mix.workflow.run import CONFIG_DIR, task_for


def protocol_pipeline(
    dataset: str, corpus: Path, cache_dir: str, overrides: Optional[Dict[str, object]] = None, train_sentences: int = 0
):
    """The paper's BiLSTM-CRF for ``dataset`` (scheme ``weighted``, the layer cache of ``cache_dir``),
    initialized: ``(nlp, optimizer, train examples, dev examples)`` on the corpus's own tokens.

    overrides: more config overrides (e.g. another scheme). train_sentences: train on the first N
    sentences only (0: all)."""
    task = task_for(dataset, architecture="paper")
    overrides = {
        "paths.train": str(corpus / dataset / "train.spacy"),
        "paths.dev": str(corpus / dataset / "dev.spacy"),
        "initialize.components.elmo.cache_dir": cache_dir,
        "initialize.components.elmo.cache_dtype": "float16",
        **(overrides or {}),
    }
    nlp = spacy.util.load_model_from_config(load_config(CONFIG_DIR / task.config, overrides=overrides), auto_fill=True)
    train = list(Corpus(corpus / dataset / "train.spacy", gold_preproc=True)(nlp))[: train_sentences or None]
    dev = list(Corpus(corpus / dataset / "dev.spacy", gold_preproc=True)(nlp))
    optimizer = nlp.initialize(lambda: train)
    nlp.evaluate(dev)  # fills the memory cache as the first evaluation of a run does
    return nlp, optimizer, train, dev


def epoch_seconds(dataset: str, corpus: Path, cache_dir: str, batch_sentences: int = 32) -> Dict[str, float]:
    """Seconds of one training epoch and one dev evaluation (after a first, warming evaluation)."""
    nlp, optimizer, train, dev = protocol_pipeline(dataset, corpus, cache_dir)
    started = time.perf_counter()
    for batch in minibatch(train, batch_sentences):
        nlp.update(batch, sgd=optimizer)
    trained = time.perf_counter()
    nlp.evaluate(dev)
    return {
        "train": trained - started,
        "dev": time.perf_counter() - trained,
        "sentences": len(train),
        "dev_sentences": len(dev),
    }


def finished_epochs(results: Path, dataset: str) -> List[int]:
    """The ``epochs`` of every finished paper-protocol run of ``dataset`` in ``results``."""
    found = []
    for path in sorted((results / "runs" / dataset).glob("*/seed*/metrics.json")):
        metrics = json.loads(path.read_text(encoding="utf-8"))
        if metrics.get("protocol", {}).get("architecture") == "paper" and isinstance(metrics.get("epochs"), int):
            found.append(metrics["epochs"])
    return found


def report(rows: Sequence[Dict], seeds: int, schemes: int, workers: int, load: float) -> str:
    lines = [
        "# The paper's protocol: cost per data set",
        "",
        f"{machine_line(load)} (other jobs on the machine slow these figures).",
        f"BiLSTM-CRF (`crf_*.cfg`, scheme `weighted`, layer cache filled), batches of 32 sentences. "
        f"Grid: {schemes} schemes x {seeds} seeds on {workers} workers.",
        "",
        "| data set | train sentences | epoch s | dev eval s | epochs per run | source of epochs | run min | grid h |",
        "|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for row in rows:
        run = row["epochs"] * (row["train"] + row["dev"]) / 60
        grid = run * seeds * schemes / workers / 60
        lines.append(
            f"| {row['dataset']} | {row['sentences']} | {row['train']:.1f} | {row['dev']:.1f} | {row['epochs']:.0f} | "
            f"{row['source']} | {run:.1f} | {grid:.1f} |"
        )
    return "\n".join(lines) + "\n"


def add_protocol_arguments(parser: argparse.ArgumentParser) -> None:
    """``--datasets``, ``--corpus`` and ``--cache-dir``: what :func:`protocol_pipeline` reads."""
    parser.add_argument("--datasets", nargs="+", default=["ud_ewt", "wnut16", "conll2000", "conll2003"])
    parser.add_argument("--corpus", type=Path, default=Path("corpus"))
    parser.add_argument("--cache-dir", default="cache")


def machine_line(load: float) -> str:
    """The CPU, its flags, torch and the load before a one-thread measurement."""
    return (
        f"CPU: {cpu_name()} ({cpu_flags()}), {os.cpu_count()} CPUs; torch {torch.__version__}, 1 thread; "
        f"1-minute load average {load:.1f} before"
    )


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_protocol_arguments(parser)
    parser.add_argument("--results", type=Path, default=Path("results"), help="finished runs to take the epochs from")
    parser.add_argument(
        "--assume-epochs", type=int, default=40, help="epochs per run for a data set without finished runs"
    )
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--schemes", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--output", type=Path, help="also write the markdown table here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    load = os.getloadavg()[0]
    rows = []
    for dataset in args.datasets:
        row = {"dataset": dataset, **epoch_seconds(dataset, args.corpus, args.cache_dir)}
        epochs = finished_epochs(args.results, dataset)
        row["epochs"] = sum(epochs) / len(epochs) if epochs else args.assume_epochs
        row["source"] = f"mean of {len(epochs)} finished runs" if epochs else "assumed"
        rows.append(row)
        print(json.dumps(row))
    text = report(rows, args.seeds, args.schemes, args.workers, load)
    print(text)
    if args.output:
        write_text_atomic(args.output, text)


if __name__ == "__main__":
    main()
