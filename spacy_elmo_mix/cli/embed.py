"""``python -m spacy_elmo_mix embed``: ELMo layers for whitespace-tokenized sentences."""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spacy_elmo_mix embed", description=__doc__)
    parser.add_argument("sentences", nargs="*", help="sentences (whitespace-tokenized); read from stdin when none are given")
    parser.add_argument("--options", help="options.json (path or URL); default: the embedded model")
    parser.add_argument("--weights", help="weights.hdf5 (path or URL); default: the embedded model")
    parser.add_argument("--top-layer", type=int, default=None, help="compute layers 0..K only")
    parser.add_argument("--output", help="write all layers to this .npz file (one array per sentence)")
    args = parser.parse_args(argv)

    from ..bilm.embedder import ElmoEmbedder
    from ..default_model import default_model_files
    from ..errors import ElmoFileError

    if (args.options is None) != (args.weights is None):
        parser.error("give both --options and --weights, or neither (the embedded default model)")
    options, weights = (args.options, args.weights) if args.options else default_model_files()
    sentences = [s.split() for s in (args.sentences or sys.stdin.read().splitlines())]
    try:
        embedder = ElmoEmbedder(options, weights)
        layers = list(embedder.embed_sentences(sentences, top_layer=args.top_layer))
    except (ElmoFileError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"model: {options}  ({embedder.n_layers} layers of {embedder.model.options.output_dim} dims)")
    for tokens, array in zip(sentences, layers):
        norms = " ".join(f"L{k}={[round(float(v), 3) for v in array[k].mean(axis=0)[:3]]}" for k in range(array.shape[0]))
        print(f"{len(tokens):3d} tokens  {' '.join(tokens)[:60]!r}  mean vector (first 3 dims): {norms}")
    if args.output:
        import numpy as np

        np.savez(args.output, **{f"sentence_{i}": a for i, a in enumerate(layers)})
        print(f"wrote {args.output}")
    return 0
