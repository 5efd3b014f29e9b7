"""``spacy train`` speed with the elmo component: the layer cache and the paper's speed claim.

Trains NER (``configs/ner.cfg``) on a CoNLL-2003 slice for a few epochs in one process per setting
and measures training words per second per epoch (the time between the first updates of
consecutive epochs, so evaluation and initialization are excluded):

- cache on vs off (frozen biLM): epoch 1 computes the layers, epochs 2+ read them from the cache;
- scheme ``weighted12`` (layers 0-1: the top LSTM never runs) vs ``weighted`` (all three layers),
  with the cache off, as in the paper's comparison (19-44% faster training reported there).

All settings run side by side in one invocation; the table gives ratios.

Usage: ``python bench/train_speed.py [--sentences 2000] [--epochs 3] [--options O --weights W] [--output F]``
"""
from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "conll2003"

SETTINGS = {
    "weighted, cache on": {"scheme": "weighted", "cache_memory_mb": 2048},
    "weighted, cache off": {"scheme": "weighted", "cache_memory_mb": 0},
    "weighted12, cache off": {"scheme": "weighted12", "cache_memory_mb": 0},
    "weighted12, cache on": {"scheme": "weighted12", "cache_memory_mb": 2048},
}

# Runs in a child process per setting: trains and prints one line per epoch start time.
CHILD = r"""
import sys, time, json
from pathlib import Path
from spacy.cli.train import train
from spacy.util import registry

stamps = []

@registry.callbacks("bench.epoch_clock.v1")
def epoch_clock():
    def before_update(nlp, info):
        if not stamps or stamps[-1][0] != info["epoch"]:
            stamps.append((info["epoch"], time.perf_counter()))
    return before_update

overrides = json.loads(sys.argv[1])
overrides["training.before_update"] = {"@callbacks": "bench.epoch_clock.v1"}
train(Path(sys.argv[2]), Path(sys.argv[3]), overrides=overrides)
stamps.append((None, time.perf_counter()))
print("EPOCHS " + json.dumps([b - a for (_, a), (_, b) in zip(stamps, stamps[1:])]))
"""


def convert(sentences: int, out: Path) -> Dict[str, Path]:
    """CoNLL-2003 slices (train: ``sentences``, dev: 100) as .spacy files."""
    from spacy_elmo_mix.workflow.convert import convert_file

    paths = {"train": out / "train.spacy", "dev": out / "dev.spacy"}
    convert_file("conll2003", DATA / "train.txt", paths["train"], max_sentences=sentences)
    convert_file("conll2003", DATA / "valid.txt", paths["dev"], max_sentences=100)
    return paths


def count_words(path: Path) -> int:
    import spacy
    from spacy.tokens import DocBin

    return sum(len(doc) for doc in DocBin().from_disk(path).get_docs(spacy.blank("en").vocab))


def run_setting(name: str, setting: dict, paths: Dict[str, Path], epochs: int, files, workdir: Path) -> List[float]:
    import json

    overrides = {
        "paths.train": str(paths["train"]),
        "paths.dev": str(paths["dev"]),
        "paths.elmo_options": files[0],
        "paths.elmo_weights": files[1],
        "components.ner.model.tok2vec.elmo.mixer.name": setting["scheme"],
        "components.elmo.model.cache_memory_mb": setting["cache_memory_mb"],
        "training.max_epochs": epochs,
        "training.max_steps": 0,
        "training.eval_frequency": 100000,
        "training.logger": {"@loggers": "spacy.ConsoleLogger.v1", "progress_bar": False},
    }
    out = workdir / name.replace(" ", "_").replace(",", "")
    result = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(overrides), str(REPO / "configs" / "ner.cfg"), str(out)],
        capture_output=True, text=True,
    )
    lines = [l for l in result.stdout.splitlines() if l.startswith("EPOCHS ")]
    if result.returncode != 0 or not lines:
        raise RuntimeError(f"{name} failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return json.loads(lines[0][len("EPOCHS "):])[:epochs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=2000, help="training sentences (CoNLL-2003 slice)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--options", default=None, help="biLM options.json (default: embedded model)")
    parser.add_argument("--weights", default=None)
    parser.add_argument("--output", default=None, help="also write the markdown table here")
    args = parser.parse_args()
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        paths = convert(args.sentences, workdir)
        words = count_words(paths["train"])
        results = {}
        for name, setting in SETTINGS.items():
            print(f"running {name} ...", file=sys.stderr, flush=True)
            results[name] = run_setting(name, setting, paths, args.epochs, (args.options, args.weights), workdir)
    table = render(results, words, args)
    print(table)
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(table + "\n", encoding="utf-8")


def render(results: Dict[str, List[float]], words: int, args) -> str:
    wps = {name: [words / s for s in seconds] for name, seconds in results.items()}
    lines = [
        f"# spacy train speed (NER, CoNLL-2003 first {args.sentences} sentences, {words} words/epoch)",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {__import__('os').cpu_count()} cores, torch threads default. "
        f"Model: {args.options or 'embedded default'}.",
        "",
        "| setting | " + " | ".join(f"epoch {i + 1} words/s" for i in range(args.epochs)) + " | epochs 2+ / epoch 1 |",
        "|---|" + "---:|" * (args.epochs + 1),
    ]
    for name, rates in wps.items():
        later = statistics.mean(rates[1:]) if len(rates) > 1 else float("nan")
        lines.append(f"| {name} | " + " | ".join(f"{r:,.0f}" for r in rates) + f" | {later / rates[0]:.2f}x |")
    total = {name: sum(seconds) for name, seconds in results.items()}
    lines += [
        "",
        f"- cache: epochs 2+ are {statistics.mean(wps['weighted, cache on'][1:]) / wps['weighted, cache on'][0]:.2f}x "
        f"faster than epoch 1 (weighted scheme, cache on).",
        f"- paper's claim (cache off): `weighted12` trains {total['weighted, cache off'] / total['weighted12, cache off']:.2f}x "
        f"as fast as `weighted` over {args.epochs} epochs "
        f"({(1 - total['weighted12, cache off'] / total['weighted, cache off']) * 100:.0f}% less time).",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
