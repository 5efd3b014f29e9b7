"""The BiLSTM's length groups against one padded group, side by side in one run, end to end.

``tagging.bilstm.BiLSTMStack`` runs a batch's sentences sorted by length in groups chosen by a cost
model (``length_groups``), so that the LSTM calls do not run over every sentence's padding up to the
batch's longest. This measures what that saves in the paper's protocol: two copies of the same
BiLSTM-CRF pipeline (``configs/crf_*.cfg``, scheme ``weighted``, the layer cache filled, one thread)
train on the same shuffled batches of 32 sentences (seed 0), alternating batch by batch, one with the
length groups and one with a single padded group (the cost model's call overhead set to infinity),
so both see the same load on a shared machine; then each scores the dev set, alternating by batch
of 64 documents too. Also reported: how many padded steps a batch has per token with one group and
with the groups (one LSTM direction), and the mean number of groups. Run from the repository root
after the project's ``convert`` and ``cache`` steps::

    python bench/bilstm_groups.py --datasets conll2000 conll2003 --output bench/results/bilstm_groups.md
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import torch
from protocol_cost import add_protocol_arguments, machine_line, protocol_pipeline
from spacy.util import minibatch

from spacy_elmo_mix.atomic import write_text_atomic
from spacy_elmo_mix.tagging import bilstm

ONE_GROUP = float("inf")


def _timed(call_overhead: float, function, *args, **kwargs) -> float:
    """Seconds of ``function(*args, **kwargs)`` with the cost model's call overhead set to ``call_overhead``."""
    default = bilstm.CALL_OVERHEAD
    bilstm.CALL_OVERHEAD = call_overhead
    try:
        started = time.perf_counter()
        function(*args, **kwargs)
        return time.perf_counter() - started
    finally:
        bilstm.CALL_OVERHEAD = default


def _annotate(nlp, docs) -> None:
    for _ in nlp.pipe(doc.copy() for doc in docs):
        pass


def padding(batches: List[List[int]]) -> Dict[str, float]:
    """Padded steps per token with one group and with the length groups, and groups per batch."""
    tokens = sum(sum(lengths) for lengths in batches)
    single = sum(len(lengths) * max(lengths) for lengths in batches)
    grouped, groups = 0, 0
    for lengths in batches:
        ordered = sorted(lengths)
        chosen = bilstm.length_groups(ordered)
        grouped += sum((stop - start) * ordered[stop - 1] for start, stop in chosen)
        groups += len(chosen)
    return {"steps_one": single / tokens, "steps_groups": grouped / tokens, "groups": groups / len(batches)}


def measure(dataset: str, corpus: Path, cache_dir: str, max_batches: int) -> Dict[str, float]:
    """Train and dev seconds of both pipelines over the same batches, alternating (see the module doc)."""
    pipelines = {mode: protocol_pipeline(dataset, corpus, cache_dir) for mode in ("groups", "one")}
    overhead = {"groups": bilstm.CALL_OVERHEAD, "one": ONE_GROUP}
    train = list(pipelines["groups"][2])
    random.Random(0).shuffle(train)
    batches = list(minibatch(train, 32))[: max_batches or None]
    seconds = {f"{part}_{mode}": 0.0 for part in ("train", "dev") for mode in overhead}
    for i, batch in enumerate(batches):
        for mode in sorted(overhead, reverse=i % 2 == 1):  # who goes first alternates
            nlp, optimizer = pipelines[mode][:2]
            seconds[f"train_{mode}"] += _timed(overhead[mode], nlp.update, batch, sgd=optimizer)
    for i, docs in enumerate(minibatch([eg.predicted for eg in pipelines["groups"][3]], 64)):
        for mode in sorted(overhead, reverse=i % 2 == 1):
            nlp = pipelines[mode][0]
            seconds[f"dev_{mode}"] += _timed(overhead[mode], _annotate, nlp, docs)
    return {
        "dataset": dataset,
        "batches": len(batches),
        **seconds,
        **padding([[len(eg.predicted) for eg in batch] for batch in batches]),
    }


def report(rows: Sequence[Dict], load: float) -> str:
    lines = [
        "# The BiLSTM's length groups against one padded group",
        "",
        f"{machine_line(load)} (both settings alternate, so both see the same load).",
        "BiLSTM-CRF (`crf_*.cfg`, scheme `weighted`, layer cache filled), shuffled batches of 32 sentences, "
        f"call overhead {bilstm.CALL_OVERHEAD:g}, step overhead {bilstm.STEP_OVERHEAD:g} row-steps.",
        "",
        "| data set | batches | steps/token, one group | steps/token, groups | groups per batch "
        "| train s, one group | train s, groups | speed-up | dev s, one group | dev s, groups | speed-up |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['dataset']} | {r['batches']} | {r['steps_one']:.2f} | {r['steps_groups']:.2f} | {r['groups']:.1f} "
            f"| {r['train_one']:.1f} | {r['train_groups']:.1f} | {r['train_one'] / r['train_groups']:.2f}x "
            f"| {r['dev_one']:.1f} | {r['dev_groups']:.1f} | {r['dev_one'] / r['dev_groups']:.2f}x |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_protocol_arguments(parser)
    parser.add_argument("--batches", type=int, default=0, help="training batches per data set (default 0: an epoch)")
    parser.add_argument("--output", type=Path, help="also write the markdown table here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    load = os.getloadavg()[0]
    rows = []
    for dataset in args.datasets:
        rows.append(measure(dataset, args.corpus, args.cache_dir, args.batches))
        print(json.dumps(rows[-1]))
    text = report(rows, load)
    print(text)
    if args.output:
        write_text_atomic(args.output, text)


if __name__ == "__main__":
    main()
