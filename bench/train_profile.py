"""Where an epoch of the paper's protocol spends its time, against the network's FLOP bound.

Trains the shipped BiLSTM-CRF (``configs/crf_ner.cfg``, the embedded biLM, the layer cache filled)
on the first ``--sentences`` CoNLL-2003 training sentences for ``--epochs`` epochs in batches of 32,
with one dev evaluation per epoch, on one thread (torch and OpenBLAS), and times each part with
wall-clock timers around the package's and spaCy's functions (inclusive; the last epoch is
reported): the ELMo layers from the cache, the scheme mix, the BiLSTM's forward and backward, the
CRF's loss and Viterbi decoding, the gold tags, the optimiser, spaCy's example copies and scorer.

The FLOP bound is the BiLSTM's matrix arithmetic for that epoch (forward, input gradient and weight
gradients: 3x the forward's multiply-adds over the real tokens) at the rate one core reaches for its
shapes (``[tokens, n_in] x [n_in, 800]``; measured here with numpy's product, which the kernel uses,
and oneDNN's, the fastest on some CPUs), plus the dev set's forward pass; the table gives
measured / limit. ``--baseline PATH`` runs an older checkout too, side by side (:func:`side_by_side`).
Run from the repository root after the project's ``convert`` and ``cache`` steps::

    OPENBLAS_NUM_THREADS=1 python bench/train_profile.py --scheme weighted --output bench/results/train_profile.md
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
from collections import defaultdict
from pathlib import Path
from typing import Callable, Dict, Optional, Sequence

import numpy as np
import torch

from allennlp_speed import cpu_flags
from bilm_speed import cpu_name
from protocol_cost import protocol_pipeline
from spacy_elmo_mix.atomic import write_text_atomic

TIMES: Dict[str, float] = defaultdict(float)


def timed(name: str, function: Callable, backward: Optional[str] = None) -> Callable:
    """``function`` adding its wall-clock time to ``TIMES[name]``; with ``backward``, the callback
    it returns as its second value (a thinc backprop) is timed under that name too."""

    def run(*args, **kwargs):
        start = time.perf_counter()
        result = function(*args, **kwargs)
        TIMES[name] += time.perf_counter() - start
        if backward is None:
            return result
        output, callback = result
        return output, timed(backward, callback)

    return run


def _wrap(owner, attribute: str, name: str, backward: Optional[str] = None) -> None:
    """Time ``owner.attribute`` (skipped where an older checkout has no such function)."""
    function = getattr(owner, attribute, None)
    if function is not None:
        setattr(owner, attribute, timed(name, function, backward))


def instrument() -> None:
    """Wrap the timed functions (before the pipeline is built: thinc layers keep their functions)."""
    import spacy.language
    import spacy.scorer

    from spacy_elmo_mix import crf_component, pipeline_component
    from spacy_elmo_mix.layers import bilstm_encoder, scalar_mix
    from spacy_elmo_mix.tagging import bilstm

    for forward in ("scalar_mix_forward", "concat_forward"):
        _wrap(scalar_mix, forward, "scheme mix", "scheme mix backward")
    for convert in ("_flatten", "_split_outputs", "_pad", "_unpad"):
        _wrap(bilstm_encoder, convert, "BiLSTM thinc/torch conversions")
    _wrap(bilstm.BiLSTMStack, "forward", "BiLSTM forward")
    kernel = getattr(bilstm, "PackedBiLSTMLayer", None)
    if kernel is not None:
        kernel.backward = staticmethod(timed("BiLSTM backward", kernel.backward))
    _wrap(crf_component, "crf_loss", "CRF log-likelihood (forward, backward)")
    _wrap(crf_component, "crf_decode", "CRF Viterbi")
    component = crf_component.CRFTagger
    _wrap(component, "_gold_indices", "gold tags")
    _wrap(component, "finish_update", "optimiser (Adam, clip)")
    _wrap(component, "set_annotations", "set annotations (doc.ents)")
    _wrap(pipeline_component.Elmo, "update", "ELMo layers from the cache (training)")
    _wrap(pipeline_component.Elmo, "predict", "ELMo layers from the cache (dev)")
    _wrap(spacy.language, "_copy_examples", "spaCy example copies")
    _wrap(spacy.scorer.Scorer, "score", "spaCy scorer")


def flop_bound(tokens: int, dev_tokens: int, n_in: int, width: int = 100) -> Dict[str, float]:
    """FLOPs of the BiLSTM for a training epoch and a dev pass, and the rates of their products."""
    gates = 8 * width  # both directions
    forward = sum(2 * gates * (size + width) for size in (n_in, 2 * width))  # per token
    rates = {}
    for library in ("numpy", "oneDNN"):
        seconds, flops = 0.0, 0
        for size in (n_in, 2 * width):
            a, b = np.random.rand(512, size).astype("f"), np.random.rand(gates, size).astype("f")
            run = _numpy(a, b) if library == "numpy" else _onednn(a, b)
            if run is None:
                break
            for _ in range(10):
                run()
            start = time.perf_counter()
            for _ in range(50):
                run()
            seconds += time.perf_counter() - start
            flops += 50 * 2 * 512 * size * gates
        if seconds:
            rates[library] = flops / seconds
    return {"train_flop": 3 * forward * tokens, "dev_flop": forward * dev_tokens, "rates": rates}


def _numpy(a: np.ndarray, b: np.ndarray) -> Callable:
    return lambda: a @ b.T


def _onednn(a: np.ndarray, b: np.ndarray) -> Optional[Callable]:
    try:
        op = torch.ops.mkldnn._linear_pointwise
    except (AttributeError, RuntimeError):
        return None
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    return lambda: op(ta, tb, None, "none", [], "")


def profile(scheme: str, sentences: int, epochs: int, corpus: Path, cache_dir: str) -> Dict:
    from spacy.util import fix_random_seed, minibatch

    instrument()
    fix_random_seed(0)  # before the pipeline's weights are made (at initialize)
    mixer = {"components.crf_ner.model.tok2vec.elmo.mixer.name": scheme}
    nlp, optimizer, train, dev = protocol_pipeline("conll2003", corpus, cache_dir, mixer, sentences)
    rows = []
    for _ in range(epochs):
        TIMES.clear()
        started = time.perf_counter()
        for batch in minibatch(train, 32):
            nlp.update(batch, sgd=optimizer)
        trained = time.perf_counter()
        scores = nlp.evaluate(dev)
        rows.append(
            {"train_s": trained - started, "dev_s": time.perf_counter() - trained, "ents_f": scores["ents_f"], **TIMES}
        )
    n_in = nlp.get_pipe("crf_ner").model.get_ref("tok2vec").layers[-1].get_dim("nI")
    tokens = sum(len(eg.reference) for eg in train)
    dev_tokens = sum(len(eg.reference) for eg in dev)
    return {"scheme": scheme, "sentences": len(train), "tokens": tokens, "dev_tokens": dev_tokens, "n_in": n_in,
            "epochs": rows, **flop_bound(tokens, dev_tokens, n_in)}  # fmt: skip


def report(result: Dict) -> str:
    last = result["epochs"][-1]
    total = last["train_s"] + last["dev_s"]
    parts = {k: v for k, v in last.items() if k not in ("train_s", "dev_s", "ents_f")}
    lines = [
        f"# One epoch of the paper's protocol, profiled (scheme `{result['scheme']}`)",
        "",
        f"CPU: {cpu_name()} ({cpu_flags()}); torch {torch.__version__}, 1 thread (torch and OpenBLAS).",
        f"`configs/crf_ner.cfg`, embedded biLM (input width {result['n_in']}), layer cache filled; "
        f"{result['sentences']} CoNLL-2003 training sentences ({result['tokens']} tokens) in batches of 32, "
        f"then the dev set ({result['dev_tokens']} tokens); epoch {len(result['epochs'])} of "
        f"{len(result['epochs'])}. Timers are inclusive (the BiLSTM's forward includes its kernel's "
        "forward pass; the scorer includes nothing of the network).",
        "",
        f"Training epoch {last['train_s']:.2f} s, dev evaluation {last['dev_s']:.2f} s, "
        f"dev F1 {100 * last['ents_f']:.2f} (epochs: "
        + ", ".join(f"{e['train_s']:.2f} + {e['dev_s']:.2f} s" for e in result["epochs"])
        + ").",
        "",
        "| part | s | share of epoch + dev |",
        "|---|---:|---:|",
    ]
    for name, seconds in sorted(parts.items(), key=lambda kv: -kv[1]):
        lines.append(f"| {name} | {seconds:.3f} | {100 * seconds / total:.1f}% |")
    lines += ["", "| FLOP bound at the rate of | GFLOP/s | limit s | measured / limit |", "|---|---:|---:|---:|"]
    flops = result["train_flop"] + result["dev_flop"]
    for library, rate in result["rates"].items():
        limit = flops / rate
        lines.append(f"| {library}'s product | {rate / 1e9:.0f} | {limit:.2f} | {total / limit:.1f}x |")
    lines.append("")
    lines.append(
        f"BiLSTM arithmetic: {result['train_flop'] / 1e9:.1f} GFLOP for the training epoch (forward, "
        f"input and weight gradients), {result['dev_flop'] / 1e9:.1f} GFLOP for the dev pass."
    )
    return "\n".join(lines) + "\n"


def side_by_side(args: argparse.Namespace) -> str:
    """Run this checkout and ``args.baseline`` in turn (``args.rounds`` each, one child process per
    run) for each scheme; the table compares the medians of their last epochs."""
    here = Path(__file__).resolve().parents[1]
    lines = [
        f"# Training epoch and dev evaluation beside {args.baseline.name}",
        "",
        f"CPU: {cpu_name()} ({cpu_flags()}); torch {torch.__version__}, 1 thread (torch and OpenBLAS); "
        f"{args.sentences} CoNLL-2003 training sentences, the full dev set, epoch {args.epochs} of "
        f"{args.epochs}, medians of {args.rounds} runs each, the two checkouts in turn.",
        "",
        "| scheme | checkout | epoch s | dev s | epoch + dev s | dev F1 | speed-up (epoch) | speed-up (epoch + dev) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for scheme in args.schemes:
        runs: Dict[str, list] = {"this": [], "baseline": []}
        for _ in range(args.rounds):
            for which, root in (("baseline", args.baseline.resolve()), ("this", here)):
                runs[which].append(_child(root, scheme, args))
        medians = {
            which: {key: statistics.median(r[key] for r in found) for key in ("train_s", "dev_s", "ents_f")}
            for which, found in runs.items()
        }
        base = medians["baseline"]
        for which in ("baseline", "this"):
            m = medians[which]
            name = args.baseline.name if which == "baseline" else "this checkout"
            lines.append(
                f"| {scheme} | {name} | {m['train_s']:.2f} | {m['dev_s']:.2f} | {m['train_s'] + m['dev_s']:.2f} | "
                f"{100 * m['ents_f']:.2f} | {base['train_s'] / m['train_s']:.2f}x | "
                f"{(base['train_s'] + base['dev_s']) / (m['train_s'] + m['dev_s']):.2f}x |"
            )
    return "\n".join(lines) + "\n"


def _child(root: Path, scheme: str, args: argparse.Namespace) -> Dict:
    """One profiled run of the package at ``root`` in a fresh process: its last epoch."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "run.json"
        command = [sys.executable, __file__, "--scheme", scheme, "--sentences", str(args.sentences), "--epochs",
                   str(args.epochs), "--corpus", str(args.corpus), "--cache-dir", args.cache_dir, "--json", str(out)]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(root), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
        result = json.loads(out.read_text(encoding="utf-8"))
    print(f"{root.name} {scheme}: {json.dumps(result['epochs'][-1])[:200]}", flush=True)
    return result["epochs"][-1]


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scheme", default="weighted")
    parser.add_argument("--baseline", type=Path, help="an older checkout to run side by side (e.g. a git worktree)")
    parser.add_argument("--schemes", nargs="+", default=["weighted", "concat"], help="with --baseline")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each checkout, with --baseline")
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--corpus", type=Path, default=Path("corpus"), help="the project's corpus folder")
    parser.add_argument("--cache-dir", default="cache")
    parser.add_argument("--output", type=Path, help="also write the markdown table here")
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    args = parser.parse_args(argv)
    if os.environ.get("OPENBLAS_NUM_THREADS") != "1":
        parser.error("run with OPENBLAS_NUM_THREADS=1 (one thread, as the grid's runs)")
    torch.set_num_threads(1)
    if args.baseline:
        text = side_by_side(args)
        print(text)
        if args.output:
            write_text_atomic(args.output, text)
        return
    import spacy_elmo_mix

    print(f"spacy_elmo_mix from {Path(spacy_elmo_mix.__file__).parent}", flush=True)
    result = profile(args.scheme, args.sentences, args.epochs, args.corpus, args.cache_dir)
    text = report(result)
    print(text)
    if args.output:
        write_text_atomic(args.output, text)
    if args.json:
        write_text_atomic(args.json, json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
