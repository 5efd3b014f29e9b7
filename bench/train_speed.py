"""``spacy train`` speed with the elmo component: the layer cache and the paper's speed claim.

Trains NER (``configs/ner.cfg``) on a CoNLL-2003 slice for a few epochs in one process per setting
and measures training words per second per epoch (the time between the first updates of
consecutive epochs, so evaluation and initialization are excluded):

- cache on vs off (frozen biLM): epoch 1 computes the layers, epochs 2+ read them from the cache;
- scheme ``weighted12`` (layers 0-1: the top LSTM never runs) vs ``weighted`` (all three layers),
  with the cache off, as in the paper's comparison (19-44% faster training reported there);
- the same NER without ELMo (``configs/ner_baseline.cfg``, spaCy's hash embeddings): the speed
  that epochs 2+ with the cache can at best reach, since they still run spaCy's NER.

The biLM is the embedded default model, given files, or (``--model published-small`` /
``published-original``) random weights in a published architecture, which cost the same to run
as the published weights. All settings run side by side in one invocation; the table gives ratios.

Usage: ``python bench/train_speed.py [--sentences 2000] [--epochs 3] [--model M | --options O --weights W] [--output F] [--json F]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SPACY_ELMO_MIX_SHARED", REPO.parent / "shared")) / "data" / "conll2003"
NO_ELMO = "no ELMo (hash embeddings)"
MODEL_NAMES = {
    "embedded": "the embedded default model (2 x 512 cells, 128 projection)",
    "published-small": "random weights, published 'small' architecture (2 x 1024 cells, 128 projection, 2048 filters)",
    "published-original": "random weights, published 'original' architecture (2 x 4096 cells, 512 projection, 2048 filters)",
}

SETTINGS = {
    "weighted, cache on": {"scheme": "weighted", "cache_memory_mb": 2048},
    "weighted, cache off": {"scheme": "weighted", "cache_memory_mb": 0},
    "weighted12, cache off": {"scheme": "weighted12", "cache_memory_mb": 0},
    "weighted12, cache on": {"scheme": "weighted12", "cache_memory_mb": 2048},
    NO_ELMO: {},
}
# Published architectures (bilm-tf options), run with random weights: same cost as the real ones.
FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]
PUBLISHED = {
    "published-small": {"filters": FILTERS, "char_dim": 16, "dim": 1024, "projection_dim": 128, "n_highway": 1},
    "published-original": {"filters": FILTERS, "char_dim": 16, "dim": 4096, "projection_dim": 512, "n_highway": 2},
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


def random_published_model(name: str, out: Path):
    """``options.json`` and ``weights.hdf5`` of a random biLM in the published architecture ``name``."""
    import torch

    from bilm_speed import model_options  # bench/ is this script's folder
    from spacy_elmo_mix.bilm import BiLM
    from spacy_elmo_mix.bilm.loading import save_bilm

    torch.manual_seed(0)
    folder = save_bilm(BiLM(model_options(PUBLISHED[name])), out / name)
    return str(folder / "options.json"), str(folder / "weights.hdf5")


def run_setting(name: str, setting: dict, paths: Dict[str, Path], epochs: int, files, workdir: Path) -> List[float]:
    overrides = {
        "paths.train": str(paths["train"]),
        "paths.dev": str(paths["dev"]),
        # One epoch more than reported: each reported epoch ends where the next one starts, so none
        # includes the final evaluation and saving (seconds for a published-size biLM).
        "training.max_epochs": epochs + 1,
        "training.max_steps": 0,
        "training.eval_frequency": 100000,
        "training.logger": {"@loggers": "spacy.ConsoleLogger.v1", "progress_bar": False},
    }
    if setting:
        overrides.update(
            {
                "paths.elmo_options": files[0],
                "paths.elmo_weights": files[1],
                "components.ner.model.tok2vec.elmo.mixer.name": setting["scheme"],
                "initialize.components.elmo.cache_memory_mb": setting["cache_memory_mb"],
            }
        )
    config = REPO / "configs" / ("ner.cfg" if setting else "ner_baseline.cfg")
    out = workdir / name.replace(" ", "_").replace(",", "").replace("(", "").replace(")", "")
    result = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(overrides), str(config), str(out)],
        capture_output=True,
        text=True,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("EPOCHS ")]
    if result.returncode != 0 or not lines:
        raise RuntimeError(f"{name} failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return json.loads(lines[0][len("EPOCHS ") :])[:epochs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=2000, help="training sentences (CoNLL-2003 slice)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument(
        "--model",
        choices=["embedded", *PUBLISHED],
        default="embedded",
        help="the biLM: the embedded default, or random weights in a published architecture",
    )
    parser.add_argument("--options", default=None, help="biLM options.json (instead of --model)")
    parser.add_argument("--weights", default=None)
    parser.add_argument("--output", default=None, help="also write the markdown table here")
    parser.add_argument("--json", default=None, help="also write the epoch times (seconds) as JSON here")
    parser.add_argument(
        "--from-json", default=None, help="only print (and --output) the table of an earlier run's --json file"
    )
    args = parser.parse_args()
    if args.from_json:
        record = json.loads(Path(args.from_json).read_text(encoding="utf-8"))
        args.sentences, args.epochs = record["sentences"], len(next(iter(record["epoch_seconds"].values())))
        args.model = record["model"] if record["model"] in MODEL_NAMES else "embedded"
        args.options = None if record["model"] in MODEL_NAMES else record["model"]
        write_table(render(record["epoch_seconds"], record["words"], args), args.output)
        return
    if (args.options is None) != (args.weights is None):
        parser.error("give both --options and --weights, or neither")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        paths = convert(args.sentences, workdir)
        words = count_words(paths["train"])
        files = (args.options, args.weights)
        if args.options is None and args.model != "embedded":
            files = random_published_model(args.model, workdir)
        results = {}
        for name, setting in SETTINGS.items():
            print(f"running {name} ...", file=sys.stderr, flush=True)
            results[name] = run_setting(name, setting, paths, args.epochs, files, workdir)
    write_table(render(results, words, args), args.output)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        record = {
            "model": args.options or args.model,
            "sentences": args.sentences,
            "words": words,
            "epoch_seconds": results,
        }
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def write_table(table: str, output) -> None:
    print(table)
    if output:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(table + "\n", encoding="utf-8")


def render(results: Dict[str, List[float]], words: int, args) -> str:
    wps = {name: [words / s for s in seconds] for name, seconds in results.items()}
    lines = [
        f"# spacy train speed (NER, CoNLL-2003 first {args.sentences} sentences, {words} words/epoch)",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"torch threads: {os.environ.get('OMP_NUM_THREADS', 'default')} (OMP_NUM_THREADS). "
        f"biLM: {args.options or MODEL_NAMES[args.model]}.",
        "",
        "| setting | " + " | ".join(f"epoch {i + 1} words/s" for i in range(args.epochs)) + " | epochs 2+ / epoch 1 |",
        "|---|" + "---:|" * (args.epochs + 1),
    ]
    for name, rates in wps.items():
        later = statistics.mean(rates[1:]) if len(rates) > 1 else float("nan")
        lines.append(f"| {name} | " + " | ".join(f"{r:,.0f}" for r in rates) + f" | {later / rates[0]:.2f}x |")
    total = {name: sum(seconds) for name, seconds in results.items()}
    first, cached, no_elmo = (
        wps["weighted, cache on"][0],
        statistics.mean(wps["weighted, cache on"][1:]),
        statistics.mean(wps[NO_ELMO]),
    )
    lines += [
        "",
        f"- cache: epochs 2+ are {cached / first:.2f}x faster than epoch 1 (weighted scheme, cache on).",
        f"- with the cache, epochs 2+ do no biLM work and train at {cached / no_elmo:.2f}x the speed of the same NER "
        f"without ELMo ({no_elmo:,.0f} words/s): what remains is spaCy's NER training. The speed-up over epoch 1 "
        f"is therefore set by the biLM's share of epoch 1: {1 - first / cached:.0%} here (5x needs 80%).",
        f"- paper's claim (cache off): `weighted12` trains {total['weighted, cache off'] / total['weighted12, cache off']:.2f}x "
        f"as fast as `weighted` over {args.epochs} epochs "
        f"({(1 - total['weighted12, cache off'] / total['weighted, cache off']) * 100:.0f}% less time).",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
