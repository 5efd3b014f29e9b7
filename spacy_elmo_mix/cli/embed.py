"""``python -m spacy_elmo_mix embed``: ELMo layers for whitespace-tokenized sentences."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, List, Optional, Tuple

from . import HelpFormatter, description, program

if TYPE_CHECKING:
    import numpy as np

# (tokens, layers [n_layers, n_tokens, dim]) of each sentence, in input order.
Embedded = Iterator[Tuple[List[str], "np.ndarray"]]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog=program("embed"), description=description(__doc__), formatter_class=HelpFormatter
    )
    parser.add_argument(
        "sentences", nargs="*", help="sentences (whitespace-tokenized); read from stdin when none are given"
    )
    parser.add_argument("--options", help="options.json (path or URL); default: the embedded model")
    parser.add_argument("--weights", help="weights.hdf5 (path or URL); default: the embedded model")
    parser.add_argument("--top-layer", type=int, default=None, help="compute layers 0..K only (default: all)")
    parser.add_argument(
        "--compute-dtype",
        choices=["float32", "bfloat16", "auto"],
        default="float32",
        help="float32 (exact), bfloat16, or auto: bfloat16 only where the hardware runs it natively",
    )
    parser.add_argument("--output", type=Path, help="write all layers to this .npz file (one array per sentence)")
    parser.add_argument("--force", action="store_true", help="replace an existing --output file")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)

    from ..bilm.embedder import ElmoEmbedder
    from ..default_model import default_model_files

    if (args.options is None) != (args.weights is None):
        parser.error("give both --options and --weights, or neither (the embedded default model)")
    if args.output is not None:
        check_output(args.output, args.force)
    options, weights = (args.options, args.weights) if args.options else default_model_files()
    sentences = [s.split() for s in (args.sentences or sys.stdin.read().splitlines())]
    embedder = ElmoEmbedder(options, weights, dtype=args.compute_dtype)
    top_layer = embedder.model.check_top_layer(args.top_layer)  # before the bar: a bad value is one line
    model = f"model: {options}  ({top_layer + 1} layers of {embedder.model.options.output_dim} dims)"
    embedded = embed_with_progress(embedder, sentences, top_layer, progress=not args.no_progress)
    if args.output is None:
        print_sentences(model, embedded)
        return 0
    layers = [array for _, array in embedded]
    save_layers(args.output, layers)
    print(f"wrote {args.output}: {len(layers)} sentences; {model}")
    return 0


def embed_with_progress(embedder, sentences: List[List[str]], top_layer: int, progress: bool) -> Embedded:
    """Yield ``(tokens, layers)`` of each sentence in order, counted by a tqdm bar on stderr.

    embedder: an ElmoEmbedder; sentences: token lists; top_layer: compute layers 0..top_layer;
    progress: show the bar (False: ``--no-progress``).
    """
    from tqdm import tqdm

    with tqdm(total=len(sentences), unit="sent", desc="ELMo", disable=not progress) as bar:
        for tokens, array in zip(sentences, embedder.embed_sentences(sentences, top_layer=top_layer)):
            yield tokens, array
            bar.update()


def print_sentences(model: str, embedded: Embedded) -> None:
    """Print ``model`` (a line about the biLM), then a line per sentence of ``embedded`` (the
    ``(tokens, layers)`` pairs) above the progress bar."""
    from tqdm import tqdm

    print(model)
    for tokens, array in embedded:
        tqdm.write(describe(tokens, array), file=sys.stdout)


def describe(tokens: List[str], array: np.ndarray) -> str:
    """One line about a sentence: its length, its start and the first dims of each layer's mean vector.

    tokens: the sentence; array: its layers ``[n_layers, n_tokens, dim]``.
    """
    means = " ".join(f"L{k}={[round(float(v), 3) for v in array[k].mean(axis=0)[:3]]}" for k in range(array.shape[0]))
    return f"{len(tokens):3d} tokens  {' '.join(tokens)[:60]!r}  mean vector (first 3 dims): {means}"


def save_layers(path: Path, layers: List[np.ndarray]) -> None:
    """Write ``layers`` (one array per sentence) to the ``.npz`` file ``path`` atomically, as
    ``sentence_0``, ``sentence_1``..."""
    import numpy as np

    from ..atomic import atomic_write

    with atomic_write(path) as tmp, tmp.open("wb") as f:
        # numpy's stub: a ** mapping might set savez's allow_pickle (these keys never do)
        np.savez(f, **{f"sentence_{i}": a for i, a in enumerate(layers)})  # type: ignore[arg-type]


def check_output(path: Path, force: bool) -> None:
    """Fail before any work when ``path`` cannot be written or would be replaced without ``force``."""
    from ..errors import ElmoFileError

    if path.is_dir():
        raise ElmoFileError(f"--output {path} is a folder; give a file name such as {path / 'layers.npz'}")
    if path.exists() and not force:
        raise ElmoFileError(f"--output {path} exists; pass --force to replace it")
    parent = next(p for p in path.parents if p.exists())
    if not parent.is_dir():
        raise ElmoFileError(f"cannot write --output {path}: {parent} is a file, not a folder")
