"""``python -m spacy_elmo_mix pretrain``: train an ELMo biLM on plain text and export it.

Example::

    python -m spacy_elmo_mix pretrain corpus/*.txt --heldout heldout.txt --output my_elmo \\
        --lstm-dim 512 --projection-dim 128 --max-minutes 60

The output directory receives ``checkpoint.pt`` during training (``--resume`` continues from it
exactly), then ``options.json``, ``weights.hdf5``, ``vocab.txt``, ``training_curve.png`` and
``MODEL_CARD.md``.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import List, Optional

STOP_FLAGS = ("max_steps", "max_minutes", "max_epochs")


def build_parser() -> argparse.ArgumentParser:
    """The command's arguments (model size, data, optimisation, stopping, export)."""
    from ..pretrain.config import TrainConfig

    d = TrainConfig()
    p = argparse.ArgumentParser(prog="python -m spacy_elmo_mix pretrain", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("train", nargs="+", help="training text files, one sentence or paragraph per line (UTF-8)")
    p.add_argument("--heldout", nargs="*", default=[], help="held-out text files for perplexity")
    p.add_argument("--output", required=True, help="output directory (checkpoint, exported model, model card)")
    p.add_argument("--resume", action="store_true", help="continue from OUTPUT/checkpoint.pt (settings come from the checkpoint)")
    p.add_argument("--pretokenized", action="store_true", help="split lines on whitespace instead of spaCy's tokenizer")
    p.add_argument("--max-line-chars", type=int, default=20_000, help="skip (and count) longer lines")
    size = p.add_argument_group("model size (ignored with --options or --resume)")
    size.add_argument("--options", help="an options.json giving the biLM's size")
    size.add_argument("--lstm-dim", type=int, default=512, help="LSTM cells per layer and direction")
    size.add_argument("--projection-dim", type=int, default=128, help="LSTM projection (ELMo layers have twice this)")
    size.add_argument("--n-layers", type=int, choices=(1, 2), default=2, help="LSTM layers per direction")
    size.add_argument("--filters", default="1:32,2:32,3:64,4:128,5:256", help="char-CNN filters as width:count,...")
    size.add_argument("--char-dim", type=int, default=16, help="character embedding size")
    size.add_argument("--n-highway", type=int, default=1, help="highway layers after the char-CNN")
    size.add_argument("--clip", type=float, default=3.0, help="LSTM cell and projection clip value")
    vocab = p.add_argument_group("vocabulary")
    vocab.add_argument("--min-count", type=int, default=3, help="minimum count of a vocabulary word")
    vocab.add_argument("--max-vocab", type=int, default=40_000, help="maximum vocabulary size (with <S>, </S>, <UNK>)")
    train = p.add_argument_group("training (defaults from TrainConfig; with --resume only the stop flags apply)")
    train.add_argument("--max-len", type=int, help=f"tokens per training window ({d.max_len})")
    train.add_argument("--batch-tokens", dest="tokens_per_batch", type=int, help=f"tokens per batch ({d.tokens_per_batch})")
    train.add_argument("--lr", type=float, help=f"peak Adam learning rate ({d.lr})")
    train.add_argument("--warmup", dest="warmup_steps", type=int, help=f"warmup steps ({d.warmup_steps})")
    train.add_argument("--dropout", type=float, help=f"dropout between layers ({d.dropout})")
    train.add_argument("--clip-norm", type=float, help=f"gradient norm clipping ({d.clip_norm})")
    train.add_argument("--seed", type=int, help=f"random seed ({d.seed})")
    train.add_argument("--max-steps", type=int, help="stop after this many steps")
    train.add_argument("--max-minutes", type=float, help="stop after this many minutes of training")
    train.add_argument("--max-epochs", type=int, help=f"stop after this many epochs ({d.max_epochs})")
    train.add_argument("--eval-every", type=int, help=f"held-out perplexity every N steps ({d.eval_every})")
    train.add_argument("--checkpoint-every", type=int, help=f"checkpoint every N steps ({d.checkpoint_every})")
    out = p.add_argument_group("run and export")
    out.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    out.add_argument("--export-layers", type=int, choices=(1, 2), default=None, help="export only the first N LSTM layers")
    out.add_argument("--card-notes", help="a Markdown file appended to MODEL_CARD.md")
    out.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    from ..errors import ElmoFileError

    try:
        return _run(args)
    except (ElmoFileError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\ninterrupted: rerun with --resume to continue from the last checkpoint in {args.output}", file=sys.stderr)
        return 130


def _run(args: argparse.Namespace) -> int:
    import torch

    from ..pretrain.checkpoint import CHECKPOINT_NAME, load_checkpoint
    from ..pretrain.data import prepare_data
    from ..pretrain.model import LanguageModel
    from ..pretrain.trainer import Trainer
    from ..pretrain.vocab import Vocabulary

    if args.threads:
        torch.set_num_threads(args.threads)
    output = Path(args.output)
    state = load_checkpoint(output / CHECKPOINT_NAME) if args.resume else None
    config = _config(args, state)
    options = _options(args, state)
    vocab = Vocabulary(state["vocab"]) if state else None
    data = prepare_data(args.train, args.heldout, config.max_len, args.pretokenized, args.min_count, args.max_vocab, vocab=vocab, max_line_chars=args.max_line_chars)
    torch.manual_seed(config.seed)
    model = LanguageModel(options, len(data.vocab), dropout=config.dropout)
    trainer = Trainer(model, data, config, output)
    if state:
        trainer.load_state_dict(state)
    summary = trainer.train(progress=not args.no_progress)
    _export(args, trainer, summary)
    return 0


def _config(args: argparse.Namespace, state):
    """TrainConfig from the checkpoint (resuming) or the flags; stop flags always apply."""
    from ..pretrain.config import TrainConfig

    given = {k: v for k, v in vars(args).items() if v is not None and k in TrainConfig.__dataclass_fields__}
    if state is None:
        return TrainConfig.from_dict(given)
    stops = {k: v for k, v in given.items() if k in STOP_FLAGS}
    return TrainConfig.from_dict({**state["config"], **stops})


def _options(args: argparse.Namespace, state):
    """BiLMOptions from the checkpoint, an options.json or the size flags."""
    from ..bilm import BiLMOptions

    if state is not None:
        return BiLMOptions.from_dict(state["options"], source="checkpoint")
    if args.options:
        return BiLMOptions.from_file(args.options)
    try:
        filters = [[int(w), int(n)] for w, n in (f.split(":") for f in args.filters.split(","))]
    except ValueError:
        raise ValueError(f"--filters must look like 1:32,2:32,3:64 (width:count pairs), got {args.filters!r}") from None
    return BiLMOptions.from_dict(
        {
            "lstm": {"dim": args.lstm_dim, "projection_dim": args.projection_dim, "n_layers": args.n_layers,
                     "cell_clip": args.clip, "proj_clip": args.clip, "use_skip_connections": True},
            "char_cnn": {"activation": "relu", "filters": filters, "n_highway": args.n_highway, "embedding": {"dim": args.char_dim},
                         "n_characters": 262, "max_characters_per_token": 50},
        },
        source="command-line size flags",
    )


def _export(args: argparse.Namespace, trainer, summary) -> None:
    """Write the model files, the training curve and the model card; print where they are."""
    from ..bilm import BiLMOptions
    from ..pretrain.card import write_model_card
    from ..pretrain.evaluate import unigram_perplexity
    from ..pretrain.export import export_model
    from ..pretrain.plot import plot_training_curve

    output, data = Path(args.output), trainer.data
    bilm = trainer.model.bilm
    export_model(bilm, data.vocab, output, n_layers=args.export_layers)
    unigram = unigram_perplexity(data.train, data.heldout, data.type_to_vocab, len(data.vocab)) if data.heldout else None
    plot_training_curve(trainer.history, output / "training_curve.png", unigram)
    exported = args.export_layers or bilm.options.lstm.n_layers
    options = BiLMOptions.from_file(output / "options.json")
    info = {
        "data": data.summary, "config": trainer.config.to_dict(), "training": summary, "unigram_ppl": unigram,
        "n_parameters": _exported_parameters(output), "weights_bytes": os.path.getsize(output / "weights.hdf5"),
        "exported_layers": exported, "trained_layers": bilm.options.lstm.n_layers, "curve": "training_curve.png",
    }
    notes = Path(args.card_notes).read_text(encoding="utf-8") if args.card_notes else ""
    write_model_card(output / "MODEL_CARD.md", options, info, notes)
    print(f"exported {output}/options.json, weights.hdf5, vocab.txt, MODEL_CARD.md, training_curve.png")
    if unigram:
        print(f"held-out perplexity: forward {summary['heldout_forward_ppl']:.1f}, backward {summary['heldout_backward_ppl']:.1f}, unigram {unigram:.1f}")


def _exported_parameters(directory: Path) -> int:
    """Number of values in the exported ``weights.hdf5``."""
    import h5py

    with h5py.File(directory / "weights.hdf5", "r") as f:
        sizes: List[int] = []
        f.visititems(lambda name, obj: sizes.append(obj.size) if isinstance(obj, h5py.Dataset) else None)
    return int(sum(sizes))
