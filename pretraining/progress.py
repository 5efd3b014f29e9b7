"""Record the embedded biLM's training run: ``pretraining/run.json`` and the progress block of
``pretraining/README.md``, from the run's checkpoint.

The checkpoint itself (46 MB with the optimizer state) is not in the repository; ``run.json`` keeps
what makes the shipped model traceable to it: the checkpoint's sha256, position, time, settings,
data and every held-out evaluation, the vocabulary's sha256, and the sha256 of its biLM's tensors,
which ``tests/test_pretrain_next_default.py`` checks against ``spacy_elmo_mix/default_model/``.
Run from the repository root after a training session::

    python pretraining/progress.py --checkpoint pretraining/checkpoint.pt
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Mapping, Optional, Sequence

import torch

from spacy_elmo_mix.atomic import write_text_atomic
from spacy_elmo_mix.pretrain.checkpoint import load_checkpoint
from spacy_elmo_mix.workflow.identity import file_sha256

FOLDER = Path(__file__).resolve().parent
RECORD = FOLDER / "run.json"
START, END = "<!-- progress: written by progress.py -->", "<!-- /progress -->"


def tensors_sha256(tensors: Mapping[str, torch.Tensor]) -> str:
    """One sha256 over named tensors (sorted names, dtype, shape and bytes): equal digests mean
    the same tensors bit for bit, whatever file they came from."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        value = tensors[name].detach().cpu().contiguous()
        digest.update(f"{name}:{value.dtype}:{tuple(value.shape)}:".encode())
        digest.update(value.view(torch.uint8).numpy().tobytes() if value.numel() else b"")
    return digest.hexdigest()


def words_sha256(words: Sequence[str]) -> str:
    """The sha256 of a vocabulary: its words, one per line, in order."""
    return hashlib.sha256("\n".join(words).encode("utf-8")).hexdigest()


def record_of(state: dict, checkpoint: Path) -> dict:
    """What ``run.json`` keeps of a checkpoint's ``state`` (everything but weights, optimizer,
    random states and the per-step training rows, of which it keeps the predicted-token count)."""
    history = state["history"]
    bilm = {k[len("bilm.") :]: v for k, v in state["model"].items() if k.startswith("bilm.")}
    return {
        "checkpoint": {"file": checkpoint.name, "bytes": checkpoint.stat().st_size, "sha256": file_sha256(checkpoint)},
        "bilm_sha256": tensors_sha256(bilm),
        "vocab_sha256": words_sha256(state["vocab"]),
        "position": state["position"],
        "elapsed_s": state["elapsed_s"],
        "config": state["config"],
        "options": state["options"],
        "data": state["data"],
        "summary": state["summary"],
        "history": {
            "predicted_tokens": int(sum(row[3] for row in history["train"])),
            "windows": history.get("windows", [[0, state["config"]["max_len"]]]),
            "heldout": history["heldout"],
            "heldout_as_trained": history.get("heldout_as_trained", []),
        },
    }


def progress_block(record: dict) -> str:
    """The position, time and every held-out evaluation of a run's record, as Markdown."""
    position, history = record["position"], record["history"]
    heldout_len = record["config"].get("heldout_max_len") or record["config"]["max_len"]
    as_trained = {row[0]: row[1:3] for row in history["heldout_as_trained"]}
    rows = []
    for step, forward, backward, elapsed in history["heldout"]:
        window = [length for start, length in history["windows"] if start < step or start == 0][
            -1
        ]  # what the last step trained on
        long = " | ".join(f"{v:.1f}" for v in as_trained[step]) if step in as_trained else "- | -"
        rows.append(f"| {step} | {elapsed / 60:.1f} | {window} | {forward:.1f} | {backward:.1f} | {long} |")
    return "\n".join(
        [
            f"{position['step']:,} steps (epoch {position['epoch']}), {record['elapsed_s'] / 60:.0f} minutes of training, "
            f"{history['predicted_tokens']:,} predicted tokens per direction. Held-out perplexity in windows of {heldout_len} tokens (as in the "
            "first phase) and, from the change of training windows on, in the training windows (lines up to that length whole).",
            "",
            f"| step | training minutes | training windows | held-out forward ({heldout_len}) | backward | in training windows: forward | backward |",
            "|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
        ]
    )


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(
        description="Write pretraining/run.json and the README's progress block from a checkpoint."
    )
    parser.add_argument(
        "--checkpoint",
        type=Path,
        default=FOLDER / "checkpoint.pt",
        help="the run's checkpoint.pt (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    record = record_of(load_checkpoint(args.checkpoint), args.checkpoint)
    write_text_atomic(RECORD, json.dumps(record, indent=1) + "\n")
    readme = FOLDER / "README.md"
    head, rest = readme.read_text(encoding="utf-8").split(START, 1)
    _, tail = rest.split(END, 1)
    write_text_atomic(readme, f"{head}{START}\n{progress_block(record)}\n{END}{tail}")


if __name__ == "__main__":
    main()
