"""Rewrite the progress block of pretraining/README.md from pretraining/checkpoint.pt.

Run from the repository root after a training session: ``python pretraining/progress.py``.
"""
from __future__ import annotations

from pathlib import Path

from spacy_elmo_mix.atomic import write_text_atomic
from spacy_elmo_mix.pretrain.checkpoint import load_checkpoint

FOLDER = Path(__file__).resolve().parent
START, END = "<!-- progress: written by progress.py -->", "<!-- /progress -->"


def progress_block(state: dict) -> str:
    """The position, time and every held-out evaluation of a checkpoint, as Markdown."""
    position, history = state["position"], state["history"]
    tokens = int(sum(row[3] for row in history["train"]))
    windows = history.get("windows", [[0, state["config"]["max_len"]]])
    heldout_len = state["config"].get("heldout_max_len") or state["config"]["max_len"]
    as_trained = {row[0]: row[1:3] for row in history.get("heldout_as_trained", [])}
    rows = []
    for step, forward, backward, elapsed in history["heldout"]:
        window = [length for start, length in windows if start < step or start == 0][-1]  # what the last step trained on
        long = " | ".join(f"{v:.1f}" for v in as_trained[step]) if step in as_trained else "- | -"
        rows.append(f"| {step} | {elapsed / 60:.1f} | {window} | {forward:.1f} | {backward:.1f} | {long} |")
    return "\n".join([
        f"{position['step']:,} steps (epoch {position['epoch']}), {state['elapsed_s'] / 60:.0f} minutes of training, "
        f"{tokens:,} predicted tokens per direction. Held-out perplexity in windows of {heldout_len} tokens (as in the "
        "first phase) and, from the change of training windows on, in the training windows (lines up to that length whole).",
        "",
        f"| step | training minutes | training windows | held-out forward ({heldout_len}) | backward | in training windows: forward | backward |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
    ])


def main() -> None:
    readme = FOLDER / "README.md"
    text = readme.read_text(encoding="utf-8")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    block = progress_block(load_checkpoint(FOLDER / "checkpoint.pt"))
    write_text_atomic(readme, f"{head}{START}\n{block}\n{END}{tail}")


if __name__ == "__main__":
    main()
