"""``python -m spacy_elmo_mix embed``: ELMo layers for whitespace-tokenized sentences."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spacy_elmo_mix embed", description=__doc__)
    parser.add_argument("sentences", nargs="*", help="sentences (whitespace-tokenized); read from stdin when none are given")
    parser.add_argument("--options", help="options.json (path or URL); default: the embedded model")
    parser.add_argument("--weights", help="weights.hdf5 (path or URL); default: the embedded model")
    parser.add_argument("--top-layer", type=int, default=None, help="compute layers 0..K only")
    parser.add_argument(
        "--compute-dtype", choices=["float32", "bfloat16", "auto"], default="float32",
        help="float32 (exact), bfloat16, or auto: bfloat16 only where the hardware runs it natively",
    )
    parser.add_argument("--output", type=Path, help="write all layers to this .npz file (one array per sentence)")
    parser.add_argument("--force", action="store_true", help="replace an existing --output file")
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
    layers = list(embedder.embed_sentences(sentences, top_layer=args.top_layer))
    print(f"model: {options}  ({embedder.n_layers} layers of {embedder.model.options.output_dim} dims)")
    for tokens, array in zip(sentences, layers):
        norms = " ".join(f"L{k}={[round(float(v), 3) for v in array[k].mean(axis=0)[:3]]}" for k in range(array.shape[0]))
        print(f"{len(tokens):3d} tokens  {' '.join(tokens)[:60]!r}  mean vector (first 3 dims): {norms}")
    if args.output:
        import numpy as np

        from ..atomic import atomic_write

        with atomic_write(args.output) as tmp, tmp.open("wb") as f:
            np.savez(f, **{f"sentence_{i}": a for i, a in enumerate(layers)})
        print(f"wrote {args.output}")
    return 0


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
