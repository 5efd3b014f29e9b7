"""``python -m spacy_elmo_mix cache``: precompute the ELMo layer cache for ``.spacy`` corpora.

The corpora are read exactly as the training configs read them (``spacy.Corpus.v1`` with
``gold_preproc = false``: each doc is the text retokenized by the ``--lang`` tokenizer, e.g.
``1996-08-22`` -> ``1996 - 08 - 22``; ``--gold-preproc`` for configs with ``gold_preproc = true``: the
stored tokens, one doc per stored sentence), so the cache holds the token sequences training and
evaluation look up. Every doc is cut into sentences (see :func:`spacy_elmo_mix.layers.segmentation.sentence_token_lists`);
sentences already in the cache are read back (and verified), the others are embedded in batches and
written. Training with the same model, ``--top-layer`` (or a lower one), dtype, compute dtype and
cache directory then does no biLM work; the defaults are those of the shipped configs (``float32``
storage and compute, ``max_length`` 256, all layers), so ``--initialize.components.elmo.cache_dir``
is the only override training needs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional, Sequence, Set, Tuple

from ..layers.segmentation import DEFAULT_MAX_LENGTH
from . import HelpFormatter, description, program


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    if (args.options is None) != (args.weights is None):
        _parser().error("give both --options and --weights, or neither (the embedded default model)")
    if args.batch_size < 1 or args.max_length < 1:
        _parser().error("--batch-size and --max-length must be positive")

    from ..bilm.embedder import ElmoEmbedder
    from ..cache import LayerCache
    from ..default_model import default_model_files
    from ..errors import ElmoFileError, ElmoInputError

    try:
        options, weights = (args.options, args.weights) if args.options else default_model_files()
    except ElmoFileError as exc:
        print(f"error: {exc} (on the command line: --options and --weights)", file=sys.stderr)
        return 1
    try:
        sentences = unique_sentences(args.corpora, args.max_length, args.lang, args.gold_preproc)
        embedder = ElmoEmbedder(options, weights, dtype=args.compute_dtype)
        top_layer = embedder.model.check_top_layer(args.top_layer)
        cache = LayerCache.for_model(embedder.model, args.cache_dir, dtype=args.dtype, memory_bytes=0)
    except (ElmoFileError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    compute = lambda batch: embedder.embed_batch(batch, top_layer=top_layer)  # noqa: E731
    try:
        error = fill(cache, sentences, top_layer, compute, args.batch_size)
    except ValueError as exc:  # layers the stored dtype cannot hold (beyond the float16 range)
        raise ElmoInputError(
            f"{args.cache_dir}: cannot cache these layers as {args.dtype}: {exc} (--dtype float32)"
        ) from exc
    print(summary(cache, sentences, top_layer))
    if args.report and not error:
        write_report(args.report, cache, args.corpora, sentences, top_layer)
    if error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=program("cache"), description=description(__doc__), formatter_class=HelpFormatter
    )
    parser.add_argument("corpora", nargs="+", type=Path, help=".spacy files (DocBin)")
    parser.add_argument("--cache-dir", type=Path, required=True, help="cache directory (shared by runs and models)")
    parser.add_argument("--options", help="options.json (path or URL); default: the embedded model")
    parser.add_argument("--weights", help="weights.hdf5 (path or URL); default: the embedded model")
    parser.add_argument(
        "--lang", default="en", help="the language of the training pipelines' tokenizer (the configs' nlp.lang)"
    )
    parser.add_argument(
        "--gold-preproc",
        action="store_true",
        help="read the corpora as a config with gold_preproc = true does (stored tokens and sentences)",
    )
    parser.add_argument("--top-layer", type=int, default=None, help="cache layers 0..K only (default: all)")
    parser.add_argument(
        "--dtype",
        choices=["float16", "float32"],
        default="float32",
        help="stored precision: the cache_dtype of the pipelines that will read the cache (default: %(default)s, "
        "as in the shipped configs; float16 halves the space, then train with cache_dtype float16)",
    )
    parser.add_argument(
        "--compute-dtype",
        choices=["float32", "bfloat16", "auto"],
        default="float32",
        help="the biLM's compute precision: the compute_dtype of the pipelines that will read the cache",
    )
    parser.add_argument(
        "--report",
        type=Path,
        help="also write a JSON summary here (the corpora's sha256, the cache folder, counts): "
        "a workflow's output that changes only when what was cached changes",
    )
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per biLM batch")
    parser.add_argument(
        "--max-length",
        type=int,
        default=DEFAULT_MAX_LENGTH,
        help="longest token sequence (longer ones are cut); use the component's max_length, the cache is keyed by these sequences",
    )
    return parser


def unique_sentences(
    corpora: Sequence[Path], max_length: int, lang: str = "en", gold_preproc: bool = False
) -> List[List[str]]:
    """The distinct token sequences of all docs in ``corpora`` as training sees them, shortest first.

    corpora: ``.spacy`` files; a missing or unreadable one raises ElmoFileError naming it.
    max_length: passed to :func:`~spacy_elmo_mix.layers.segmentation.sentence_token_lists`.
    lang: the tokenizer's language; docs are read like ``spacy.Corpus.v1`` with ``gold_preproc = false``
    (the reference text retokenized), i.e. the ``predicted`` docs of the training Examples.
    gold_preproc: read them as ``gold_preproc = true`` does instead (stored tokens, a doc per sentence).
    """
    import spacy
    from spacy.training import Corpus

    from ..errors import ElmoFileError, ElmoInputError
    from ..layers.segmentation import sentence_token_lists

    try:
        nlp = spacy.blank(lang)
    except ImportError as exc:
        raise ElmoInputError(f"--lang {lang!r}: not a language spaCy knows ({exc})") from exc
    seen: Set[Tuple[str, ...]] = set()
    for path in corpora:
        try:
            docs = [example.predicted for example in Corpus(path, gold_preproc=gold_preproc)(nlp)]
        except Exception as exc:  # msgpack/zlib raise many types for a damaged file
            raise ElmoFileError(f"cannot read the corpus {path}: {exc}") from exc
        if not docs:
            raise ElmoInputError(
                f"{path}: no docs found (expected a .spacy file or a folder of them, as `spacy convert` writes)"
            )
        for doc in docs:
            seen.update(tuple(tokens) for tokens in sentence_token_lists(doc, max_length))
    return [list(tokens) for tokens in sorted(seen, key=lambda tokens: (len(tokens), tokens))]


def fill(cache, sentences: List[List[str]], top_layer: int, compute, batch_size: int) -> Optional[str]:
    """Make the cache hold layers ``0..top_layer`` of every sentence; returns the disk error, if any.

    compute: embeds a list of sentences (called only for the ones missing from the cache).
    """
    from tqdm import tqdm

    with tqdm(total=len(sentences), unit="sent", desc="ELMo cache") as progress:
        for start in range(0, len(sentences), batch_size):
            cache.get_or_compute(sentences[start : start + batch_size], top_layer, compute)
            progress.update(min(batch_size, len(sentences) - start))
            stats = cache.stats
            progress.set_postfix(hits=stats.hits, misses=stats.misses, refresh=False)
            if cache.disk_error:
                return cache.disk_error
    return None


def write_report(path: Path, cache, corpora: Sequence[Path], sentences: List[List[str]], top_layer: int) -> None:
    """Write the JSON summary of a filled cache to ``path`` (atomically).

    cache: the filled LayerCache; corpora: the ``.spacy`` files read; sentences: their distinct
    sequences; top_layer: the highest layer cached.
    """
    import json

    from ..atomic import write_text_atomic
    from ..workflow.identity import file_sha256

    report = {
        "cache": cache.path.name,
        "corpora": {str(p): file_sha256(p) for p in corpora},
        "sentences": len(sentences),
        "tokens": sum(len(s) for s in sentences),
        "top_layer": top_layer,
    }
    write_text_atomic(path, json.dumps(report, indent=2) + "\n")


def summary(cache, sentences: List[List[str]], top_layer: int) -> str:
    """One paragraph: sentences, tokens, hits/misses, the cache directory and its size."""
    stats, n_tokens = cache.stats, sum(len(s) for s in sentences)
    size = sum(path.stat().st_size for path in cache.path.iterdir() if path.is_file())
    return (
        f"{len(sentences)} distinct sentences, {n_tokens} tokens, layers 0..{top_layer}: "
        f"{stats.hits} already cached, {stats.misses} computed, {stats.corrupt_entries} damaged\n"
        f"cache: {cache.path} ({stats.disk_entries} entries, {size / 2**20:.1f} MiB)"
    )
