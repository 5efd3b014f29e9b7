"""Does a biLM carry context beyond its training windows? Two measures on held-out lines.

Run from the repository root::

    python pretraining/long_context.py --checkpoint pretraining/checkpoint.pt
    python pretraining/long_context.py --options spacy_elmo_mix/default_model/options.json \\
        --weights spacy_elmo_mix/default_model/weights.hdf5

``--checkpoint`` (a pretraining checkpoint, which has the softmax): held-out perplexity by position
in lines cut only at 256 tokens, per direction (position = tokens the direction has read).
``--options/--weights`` (any exported biLM): the cosine between a token's top-layer vector in a long
line (70-250 tokens) and the same token embedded with only 20 tokens of context on each side, for
directions that have read at most 30 tokens and for those that have read more. A biLM that carries
context has cosines near 1 in both groups; one that breaks past its windows, much lower past 30.
"""

from __future__ import annotations

import argparse
from typing import List, Tuple

import numpy as np
import torch

HELDOUT = "../shared/data/raw_text/heldout.txt"
BINS = ((1, 10), (10, 20), (20, 30), (30, 40), (40, 60), (60, 90), (90, 130), (130, 257))


def perplexity_by_position(checkpoint: str, heldout: str) -> List[str]:
    """Markdown rows: position range, forward and backward perplexity, predictions."""
    sums, counts = position_nll(checkpoint, heldout)
    rows = ["| positions | forward | backward | predictions per direction |", "|---|---:|---:|---:|"]
    for lo, hi in BINS:
        n = counts[:, lo:hi].sum(axis=1)
        if n[0]:
            ppl = np.exp(sums[:, lo:hi].sum(axis=1) / n)
            rows.append(f"| {lo}-{hi - 1} | {ppl[0]:.1f} | {ppl[1]:.1f} | {int(n[0]):,} |")
    return rows


def position_nll(checkpoint: str, heldout: str) -> Tuple[np.ndarray, np.ndarray]:
    """``(nll_sums, predictions)``, both ``[direction, position]`` (position = tokens read, 0-257),
    over the held-out lines in windows of 256 tokens."""
    from spacy_elmo_mix.bilm import BiLMOptions
    from spacy_elmo_mix.pretrain.batches import IGNORE
    from spacy_elmo_mix.pretrain.checkpoint import load_checkpoint
    from spacy_elmo_mix.pretrain.data import prepare_data
    from spacy_elmo_mix.pretrain.model import LanguageModel
    from spacy_elmo_mix.pretrain.vocab import Vocabulary

    state = load_checkpoint(checkpoint)
    model = LanguageModel(BiLMOptions.from_dict(state["options"]), len(state["vocab"]))
    model.load_state_dict(state["model"])
    model.eval()
    data = prepare_data([heldout], [heldout], max_len=256, vocab=Vocabulary(state["vocab"]))
    sums, counts = np.zeros((2, 258)), np.zeros((2, 258))
    with torch.no_grad():
        for start in range(0, len(data.heldout), 32):
            batch = data.make_batch(data.heldout[start : start + 32])
            steps = np.repeat(np.arange(len(batch.batch_sizes)), batch.batch_sizes)
            for d, (layers, targets) in enumerate(
                zip(model.encode(batch), (batch.forward_targets, batch.backward_targets))
            ):
                keep = targets != IGNORE
                log_probs = model.softmax(layers[-1][keep], targets[keep]).output.numpy()
                np.add.at(sums[d], steps[keep.numpy()], -log_probs)
                np.add.at(counts[d], steps[keep.numpy()], 1)
    return sums, counts


def context_cosines(options: str, weights: str, heldout: str, n_lines: int = 40) -> List[str]:
    """Markdown rows: mean and 10th percentile of the cosines, within and beyond 30 tokens read."""
    from spacy_elmo_mix.bilm.embedder import ElmoEmbedder

    embedder = ElmoEmbedder(options, weights)
    with open(heldout, encoding="utf-8") as f:
        lines = [t for t in (line.split() for line in f) if 70 <= len(t) <= 250][:n_lines]
    groups = {"at most 30": [], "more than 30": []}
    for tokens in lines:
        full = embedder.embed_sentence(tokens)[-1]
        half = full.shape[1] // 2
        for p in range(20, len(tokens) - 20, 5):
            local = embedder.embed_sentence(tokens[p - 20 : p + 21])[-1, 20]
            for read, a, b in ((p + 1, full[p, :half], local[:half]), (len(tokens) - p, full[p, half:], local[half:])):
                cosine = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12))
                groups["at most 30" if read <= 30 else "more than 30"].append(cosine)
    rows = ["| tokens the direction has read | mean cosine | 10th percentile | vectors |", "|---|---:|---:|---:|"]
    rows += [
        f"| {name} | {np.mean(v):.3f} | {np.percentile(v, 10):.3f} | {len(v)} |" for name, v in groups.items() if v
    ]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", help="a pretraining checkpoint.pt (perplexity by position)")
    parser.add_argument("--options", help="an exported options.json (with --weights: context cosines)")
    parser.add_argument("--weights", help="an exported weights.hdf5")
    parser.add_argument("--heldout", default=HELDOUT, help=f"held-out text, one line per sentence ({HELDOUT})")
    args = parser.parse_args()
    if not args.checkpoint and not (args.options and args.weights):
        parser.error("give --checkpoint, or --options and --weights")
    torch.set_num_threads(1)
    if args.checkpoint:
        print("\n".join(perplexity_by_position(args.checkpoint, args.heldout)))
    if args.options and args.weights:
        print("\n".join(context_cosines(args.options, args.weights, args.heldout)))


if __name__ == "__main__":
    main()
