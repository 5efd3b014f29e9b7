"""``python -m spacy_elmo_mix pretrain``: train an ELMo biLM on plain text and export it.

Examples::

    python -m spacy_elmo_mix pretrain 'corpus/*.txt.gz' --heldout heldout.txt --output my_elmo \\
        --lstm-dim 512 --projection-dim 128 --max-minutes 60 --device cuda
    torchrun --standalone --nproc_per_node 4 -m spacy_elmo_mix pretrain 'corpus/*.txt' ... --device cuda

The output directory receives ``checkpoint.pt`` during training (``--resume`` continues from it
exactly, also on another number of processes), then ``options.json``, ``weights.hdf5``,
``vocab.txt``, ``training_curve.png`` and ``MODEL_CARD.md``. Under ``torchrun`` every process trains
on its share of each global batch (``--batch-tokens`` is the global batch) and only rank 0 writes.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, NoReturn, Optional, cast

from . import HelpFormatter, description, program

if TYPE_CHECKING:
    from ..pretrain.distributed import Cluster

STOP_FLAGS = ("max_steps", "max_minutes", "max_epochs")
# Resuming, these may change too: the learning rate's cooldown (defined by where the run ends) and
# the training windows (a model trained on short windows fails on longer sequences).
CHANGEABLE_ON_RESUME = (*STOP_FLAGS, "cooldown_steps", "max_len")
# The model's size and vocabulary come from the checkpoint with --resume: these may not be given.
FIXED_ON_RESUME = (
    "vocab",
    "options",
    "init_weights",
    "lstm_dim",
    "projection_dim",
    "n_layers",
    "filters",
    "char_dim",
    "n_highway",
    "clip",
    "min_count",
    "max_vocab",
)
SIZE_FLAGS = ("lstm_dim", "projection_dim", "n_layers", "filters", "char_dim", "n_highway", "clip")
# Smallest allowed value of each integer option (all must also be whole numbers).
AT_LEAST = {
    "max_line_chars": 1,
    "lstm_dim": 1,
    "projection_dim": 1,
    "char_dim": 1,
    "n_highway": 0,
    "min_count": 1,
    "max_vocab": 4,
    "max_len": 1,
    "tokens_per_batch": 1,
    "warmup_steps": 0,
    "cooldown_steps": 0,
    "seed": 0,
    "max_steps": 1,
    "max_epochs": 1,
    "eval_every": 0,
    "checkpoint_every": 0,
    "threads": 1,
}
POSITIVE = ("lr", "clip_norm", "max_minutes")
MAX_SEED = 2**63 - 1
FLAG_NAMES = {"tokens_per_batch": "--batch-tokens", "warmup_steps": "--warmup", "cooldown_steps": "--cooldown"}


def build_parser() -> argparse.ArgumentParser:
    """The command's arguments (model size, data, optimisation, stopping, devices, export)."""
    from ..pretrain.config import TrainConfig

    d = TrainConfig()
    p = _Parser(prog=program("pretrain"), description=description(__doc__), formatter_class=HelpFormatter)
    p.add_argument(
        "train",
        nargs="+",
        help="training text files or glob patterns (quoted), one sentence or paragraph per line; .gz files are decompressed",
    )
    p.add_argument("--heldout", nargs="*", default=[], help="held-out text files (or patterns) for perplexity")
    p.add_argument(
        "--output",
        required=True,
        help="output directory (checkpoint, exported model, model card); must be empty unless --resume or --overwrite",
    )
    p.add_argument(
        "--resume", action="store_true", help="continue from OUTPUT/checkpoint.pt (settings come from the checkpoint)"
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="train from scratch into a non-empty OUTPUT, replacing its model and checkpoint",
    )
    p.add_argument(
        "--stream",
        action="store_true",
        help="read the corpus from disk every epoch instead of holding it in memory (corpora larger than memory; shuffles within pools of 100 batches)",
    )
    p.add_argument(
        "--pretokenized",
        action="store_true",
        help="split lines at ASCII whitespace (a no-break space stays inside its token) instead of spaCy's tokenizer",
    )
    p.add_argument(
        "--encoding", default="utf-8", help="text encoding of the corpus files (a byte-order mark is dropped)"
    )
    p.add_argument("--max-line-chars", type=int, default=20_000, help="skip (and count) longer lines")
    size = p.add_argument_group("model size (or --options)")
    size.add_argument("--options", help="an options.json giving the biLM's size")
    size.add_argument("--lstm-dim", type=int, default=512, help="LSTM cells per layer and direction")
    size.add_argument("--projection-dim", type=int, default=128, help="LSTM projection (ELMo layers have twice this)")
    size.add_argument("--n-layers", type=int, choices=(1, 2), default=2, help="LSTM layers per direction")
    size.add_argument("--filters", default="1:32,2:32,3:64,4:128,5:256", help="char-CNN filters as width:count,...")
    size.add_argument("--char-dim", type=int, default=16, help="character embedding size")
    size.add_argument("--n-highway", type=int, default=1, help="highway layers after the char-CNN")
    size.add_argument("--clip", type=float, default=3.0, help="LSTM cell and projection clip value (0: none)")
    size.add_argument(
        "--init-weights",
        help="start the biLM from this weights.hdf5 (path or URL: a published ELMo, or a model this "
        "command exported, with its --options) instead of random weights; the softmax starts fresh",
    )
    vocab = p.add_argument_group("vocabulary")
    vocab.add_argument(
        "--vocab", help="a vocab.txt to use (<S>, </S>, <UNK>, then one word per line) instead of building one"
    )
    vocab.add_argument("--min-count", type=int, default=3, help="minimum count of a vocabulary word")
    vocab.add_argument("--max-vocab", type=int, default=40_000, help="maximum vocabulary size (with <S>, </S>, <UNK>)")
    train = p.add_argument_group("training (with --resume only the stop flags, --cooldown and --max-len may be given)")
    train.add_argument(
        "--max-len",
        type=int,
        help=f"tokens per training window: longer lines are cut (default: {d.max_len}); the biLM fails on longer "
        "sequences than it was trained on. With --resume: training goes on from the next epoch with the new windows, "
        "the held-out windows stay as they were",
    )
    train.add_argument(
        "--batch-tokens",
        dest="tokens_per_batch",
        type=int,
        help=f"predicted tokens per global batch, all processes together (default: {d.tokens_per_batch})",
    )
    train.add_argument("--lr", type=float, help=f"peak Adam learning rate (default: {d.lr})")
    train.add_argument("--warmup", dest="warmup_steps", type=int, help=f"warmup steps (default: {d.warmup_steps})")
    train.add_argument(
        "--cooldown",
        dest="cooldown_steps",
        type=int,
        help=f"decay the learning rate linearly towards 0 over the last N steps before --max-steps, e.g. to finish a run (default: {d.cooldown_steps})",
    )
    train.add_argument("--dropout", type=float, help=f"dropout between layers, 0 <= p < 1 (default: {d.dropout})")
    train.add_argument("--clip-norm", type=float, help=f"gradient norm clipping (default: {d.clip_norm})")
    train.add_argument("--seed", type=int, help=f"random seed (default: {d.seed})")
    train.add_argument("--max-steps", type=int, help="stop after this many steps (at least 1)")
    train.add_argument("--max-minutes", type=float, help="stop after this many minutes of training")
    train.add_argument("--max-epochs", type=int, help=f"stop after this many epochs (default: {d.max_epochs})")
    train.add_argument(
        "--eval-every",
        type=int,
        help=f"held-out perplexity every N steps, 0: at the end only (default: {d.eval_every})",
    )
    train.add_argument(
        "--checkpoint-every",
        type=int,
        help=f"checkpoint every N steps, 0: at the end only (default: {d.checkpoint_every})",
    )
    out = p.add_argument_group("devices, run and export")
    out.add_argument(
        "--device",
        default="cpu",
        help="cpu, cuda or cuda:N (under torchrun: cpu or cuda, one device per process); CUDA trains with bfloat16 matrix products",
    )
    out.add_argument("--threads", type=int, default=None, help="torch CPU threads (per process)")
    out.add_argument(
        "--export-layers",
        type=int,
        choices=(1, 2),
        default=None,
        help="export only the first N LSTM layers (default: all)",
    )
    out.add_argument("--card-notes", help="a Markdown file appended to MODEL_CARD.md")
    out.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors (a non-integer, a missing --output) are the package's
    one-line input errors (exit status 1), like every other bad setting."""

    def error(self, message: str):
        from ..errors import ElmoInputError

        raise ElmoInputError(f"{message} (see python -m spacy_elmo_mix pretrain --help)")


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command; expected failures raise the package's errors (printed as one line by the
    command line), prefixed with the rank when several processes train together."""
    from ..errors import ElmoMixError
    from ..pretrain import distributed

    parser = build_parser()
    args = parser.parse_args(argv)
    rank = int(os.environ.get("RANK", "0")) if distributed.launched_by_torchrun() else 0
    try:
        _validate(args, parser)
        notes = _read_notes(args.card_notes)
        if rank == 0:
            _prepare_output(args)
        cluster = distributed.start(args.device)
    except ElmoMixError as exc:
        raise _on_rank(exc, rank) from None
    try:
        code = _run(args, cluster, notes)
    except ElmoMixError as exc:
        _fail(_on_rank(exc, cluster.rank, cluster.world_size), cluster)
    except RuntimeError as exc:
        if not (cluster.distributed and _lost_peer(exc)):
            raise
        _fail(
            _on_rank(
                ElmoMixError(f"training stopped: another process failed or left ({' '.join(str(exc).split())})"),
                cluster.rank,
                cluster.world_size,
            ),
            cluster,
        )
    except KeyboardInterrupt:
        print(
            f"\ninterrupted: rerun with --resume to continue from the last checkpoint in {args.output}", file=sys.stderr
        )
        _leave_group_now(130, cluster)
        return 130
    distributed.stop(cluster)
    return code


def _fail(error: Exception, cluster: Cluster) -> NoReturn:
    """Raise ``error`` (the command line prints it as one line); in a process group whose training
    broke down, print that line here and leave at once (see :func:`_leave_group_now`), unless the user
    asked for the traceback."""
    from ..errors import debug_requested, describe_error

    if cluster.distributed and not debug_requested():
        print(f"error: {describe_error(error)}", file=sys.stderr)
        _leave_group_now(1, cluster)
    raise error from None


def _leave_group_now(code: int, cluster: Cluster) -> None:
    """End a process of a broken process group with ``code``, without the interpreter's teardown:
    gloo's threads may still hold the connection to a rank that is gone, and destroying them at exit
    can abort the process ("terminate called without an active exception", status -6) after the
    error was printed. Checkpoints are already complete on disk (written atomically)."""
    if cluster.distributed:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _lost_peer(exc: RuntimeError) -> bool:
    """Whether ``exc`` is a collective that failed because another process stopped (gloo raises a
    plain RuntimeError naming the closed connection, nccl a DistError)."""
    from torch.distributed import DistError

    return isinstance(exc, DistError) or any(
        k in str(exc) for k in ("Connection closed by peer", "Connection reset by peer", "gloo", "NCCL")
    )


def _on_rank(exc: Exception, rank: int, world_size: Optional[int] = None) -> Exception:
    """``exc`` with ``rank N of W:`` in front of its message when several processes run."""
    from ..pretrain.distributed import launched_by_torchrun

    if world_size is None:
        world_size = int(os.environ["WORLD_SIZE"]) if launched_by_torchrun() else 1
    if world_size <= 1:
        return exc
    return type(exc)(f"rank {rank} of {world_size}: {exc}")


def _validate(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Every numeric option in range, and no option that would be ignored; an ElmoInputError naming it."""
    from ..bilm.files import resolve_path
    from ..errors import ElmoInputError
    from ..pretrain.corpus import check_encoding
    from ..pretrain.distributed import parse_device

    parse_device(args.device)
    check_encoding(args.encoding)
    if args.init_weights:
        resolve_path(args.init_weights, "--init-weights file")
    for dest, low in AT_LEAST.items():
        value = getattr(args, dest)
        if value is not None and not low <= value <= MAX_SEED:
            raise ElmoInputError(f"{_flag(dest)} must be an integer of at least {low}, got {value}")
    for dest in POSITIVE:
        value = getattr(args, dest)
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ElmoInputError(f"{_flag(dest)} must be a finite number above 0, got {value}")
    if not (math.isfinite(args.clip) and args.clip >= 0):
        raise ElmoInputError(f"--clip must be a finite number of at least 0, got {args.clip}")
    if args.dropout is not None and not 0 <= args.dropout < 1:
        raise ElmoInputError(f"--dropout must be at least 0 and below 1, got {args.dropout}")
    if not args.resume:  # resuming, with the checkpoint's run length (see _config)
        _check_cooldown(args.cooldown_steps, args.max_steps)
    changed = [dest for dest in FIXED_ON_RESUME if getattr(args, dest) != parser.get_default(dest)]
    if args.resume and (changed or args.overwrite):
        given = ", ".join(_flag(d) for d in changed) or "--overwrite"
        raise ElmoInputError(
            f"--resume continues the checkpoint's model and vocabulary: {given} cannot be given with it"
        )
    sizes = [dest for dest in SIZE_FLAGS if getattr(args, dest) != parser.get_default(dest)]
    if args.options and sizes:
        raise ElmoInputError(
            f"--options gives the model's size: {', '.join(_flag(d) for d in sizes)} cannot be given with it"
        )


def _flag(dest: str) -> str:
    return FLAG_NAMES.get(dest, "--" + dest.replace("_", "-"))


def _read_notes(path: Optional[str]) -> str:
    """The ``--card-notes`` Markdown (read before training, so that a bad file fails early)."""
    from ..errors import ElmoInputError

    if not path:
        return ""
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ElmoInputError(f"--card-notes file not found: {path}") from None
    except UnicodeDecodeError as exc:
        raise ElmoInputError(f"--card-notes file {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _prepare_output(args: argparse.Namespace) -> None:
    """Refuse a non-empty output without ``--resume``/``--overwrite``, create it and check that it is
    writable, all before any training work. ``--overwrite`` removes the old checkpoint."""
    from ..errors import ElmoInputError
    from ..pretrain.checkpoint import CHECKPOINT_NAME

    output = Path(args.output)
    if output.exists() and not output.is_dir():
        raise ElmoInputError(f"--output {output} is a file, not a directory")
    held = sorted(p.name for p in output.iterdir()) if output.is_dir() else []
    if held and not (args.resume or args.overwrite):
        shown = ", ".join(held[:4]) + (", ..." if len(held) > 4 else "")
        raise ElmoInputError(
            f"--output {output} is not empty ({shown}): give --resume to continue its training, --overwrite to replace it, or an empty directory"
        )
    output.mkdir(parents=True, exist_ok=True)
    if not os.access(output, os.W_OK | os.X_OK):
        raise ElmoInputError(f"--output {output} is not writable")
    if args.overwrite:
        (output / CHECKPOINT_NAME).unlink(missing_ok=True)


def _run(args: argparse.Namespace, cluster, notes: str) -> int:
    import torch

    from ..bilm.files import resolve_path
    from ..bilm.weights import load_weights
    from ..pretrain.checkpoint import CHECKPOINT_NAME, load_checkpoint
    from ..pretrain.data import prepare_data
    from ..pretrain.model import LanguageModel
    from ..pretrain.stream import StreamingData
    from ..pretrain.trainer import Trainer
    from ..pretrain.vocab import Vocabulary

    if args.threads:
        torch.set_num_threads(args.threads)
    output = Path(args.output)
    state = load_checkpoint(output / CHECKPOINT_NAME) if args.resume else None
    config = _config(args, state)
    options = _options(args, state)
    _check_export_layers(args.export_layers, options)
    vocab = Vocabulary(state["vocab"]) if state else (Vocabulary.load(args.vocab) if args.vocab else None)
    reader = StreamingData if args.stream else prepare_data
    data = reader(
        args.train,
        args.heldout,
        config.max_len,
        args.pretokenized,
        args.min_count,
        args.max_vocab,
        vocab=vocab,
        max_line_chars=args.max_line_chars,
        encoding=args.encoding,
        heldout_max_len=config.heldout_max_len,
    )
    torch.manual_seed(config.seed)
    model = LanguageModel(options, len(data.vocab), dropout=config.dropout)
    if state is None and config.init_weights:
        load_weights(model.bilm, resolve_path(config.init_weights, "--init-weights file"))
    trainer = Trainer(model, data, config, output, cluster=cluster)
    if state:
        trainer.load_state_dict(state)
    summary = trainer.train(progress=not args.no_progress)
    if cluster.is_main:
        _report_speed(summary)
        _export(args, trainer, summary, notes)
    return 0


def _report_speed(summary: Dict) -> None:
    rate = summary["tokens_per_s"]
    speed = f", {rate:.0f} predicted tokens/s" if rate else ""
    print(f"trained {summary['steps']} steps on {summary['processes']} process(es), device {summary['device']}{speed}")


def _check_export_layers(export_layers: Optional[int], options) -> None:
    from ..errors import ElmoInputError

    if export_layers is not None and export_layers > options.lstm.n_layers:
        raise ElmoInputError(
            f"--export-layers {export_layers}: the model has only {options.lstm.n_layers} LSTM layer(s)"
        )


def _config(args: argparse.Namespace, state):
    """TrainConfig from the checkpoint (resuming) or the flags. Resuming, the stop flags, the cooldown and
    the window length apply (the held-out windows keep their length) and the other training flags may
    only repeat the checkpoint's values."""
    from ..errors import ElmoInputError
    from ..pretrain.config import TrainConfig

    given = {k: v for k, v in vars(args).items() if v is not None and k in TrainConfig.__dataclass_fields__}
    if state is None:
        return TrainConfig.from_dict(given)  # the cooldown was checked with the other flags
    changed = [k for k, v in given.items() if k not in CHANGEABLE_ON_RESUME and v != state["config"].get(k)]
    if changed:
        was = ", ".join(f"{_flag(k)} {given[k]} (checkpoint: {state['config'].get(k)})" for k in changed)
        raise ElmoInputError(
            f"--resume continues with the checkpoint's training settings; only the stop flags, --cooldown and --max-len may change: {was}"
        )
    stops = {k: v for k, v in given.items() if k in CHANGEABLE_ON_RESUME}
    config = TrainConfig.from_dict({**state["config"], **stops})
    if config.max_len != state["config"]["max_len"] and config.heldout_max_len is None:
        config.heldout_max_len = state["config"]["max_len"]
    _check_cooldown(config.cooldown_steps, config.max_steps)
    return config


def _check_cooldown(cooldown_steps: Optional[int], max_steps: Optional[int]) -> None:
    """An ElmoInputError unless a cooldown has a run length to end at and fits in it."""
    from ..errors import ElmoInputError

    if cooldown_steps and not max_steps:
        raise ElmoInputError(
            f"--cooldown {cooldown_steps} needs --max-steps (the step at which the learning rate reaches 0)"
        )
    if cooldown_steps and cooldown_steps > cast(int, max_steps):  # not None: checked above
        raise ElmoInputError(f"--cooldown {cooldown_steps} is longer than the run (--max-steps {max_steps})")


def _options(args: argparse.Namespace, state):
    """BiLMOptions from the checkpoint, an options.json or the size flags."""
    from ..bilm import BiLMOptions
    from ..errors import ElmoInputError

    if state is not None:
        return BiLMOptions.from_dict(state["options"], source="checkpoint")
    if args.options:
        return BiLMOptions.from_file(args.options)
    try:
        filters = [[int(w), int(n)] for w, n in (f.split(":") for f in args.filters.split(","))]
    except ValueError:
        raise ElmoInputError(
            f"--filters must look like 1:32,2:32,3:64 (width:count pairs), got {args.filters!r}"
        ) from None
    return BiLMOptions.from_dict(
        {
            "lstm": {
                "dim": args.lstm_dim,
                "projection_dim": args.projection_dim,
                "n_layers": args.n_layers,
                "cell_clip": args.clip,
                "proj_clip": args.clip,
                "use_skip_connections": True,
            },
            "char_cnn": {
                "activation": "relu",
                "filters": filters,
                "n_highway": args.n_highway,
                "embedding": {"dim": args.char_dim},
                "n_characters": 262,
                "max_characters_per_token": 50,
            },
        },
        source="command-line size flags",
    )


def _export(args: argparse.Namespace, trainer, summary, notes: str) -> None:
    """Write the model files, the training curve and the model card; print where they are."""
    from ..bilm import BiLMOptions
    from ..pretrain.card import write_model_card
    from ..pretrain.evaluate import unigram_perplexity
    from ..pretrain.export import export_model
    from ..pretrain.plot import plot_training_curve

    output, data = Path(args.output), trainer.data
    bilm = trainer.model.bilm
    export_model(bilm, data.vocab, output, n_layers=args.export_layers)
    train_counts = data.train_counts()
    unigram = (
        unigram_perplexity(train_counts, data.heldout_counts()) if data.heldout and train_counts is not None else None
    )
    plot_training_curve(trainer.history, output / "training_curve.png", unigram)
    exported = args.export_layers or bilm.options.lstm.n_layers
    options = BiLMOptions.from_file(output / "options.json")
    info = {
        "data": data.summary,
        "config": trainer.config.to_dict(),
        "training": summary,
        "unigram_ppl": unigram,
        "n_parameters": _exported_parameters(output),
        "weights_bytes": os.path.getsize(output / "weights.hdf5"),
        "exported_layers": exported,
        "trained_layers": bilm.options.lstm.n_layers,
        "curve": "training_curve.png",
        "windows": trainer.history["windows"],
    }
    write_model_card(output / "MODEL_CARD.md", options, info, notes)
    print(f"exported {output}/options.json, weights.hdf5, vocab.txt, MODEL_CARD.md, training_curve.png")
    if unigram:
        print(
            f"held-out perplexity: forward {summary['heldout_forward_ppl']:.1f}, backward {summary['heldout_backward_ppl']:.1f}, unigram {unigram:.1f}"
        )


def _exported_parameters(directory: Path) -> int:
    """Number of values in the exported ``weights.hdf5``."""
    import h5py

    with h5py.File(directory / "weights.hdf5", "r") as f:
        sizes: List[int] = []
        f.visititems(lambda name, obj: sizes.append(obj.size) if isinstance(obj, h5py.Dataset) else None)
    return int(sum(sizes))
