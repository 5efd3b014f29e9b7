"""``python -m spacy_elmo_mix run``: train and evaluate one dataset x scheme x seed (a grid job)."""

from __future__ import annotations

import argparse
import json
from typing import Dict, List, Optional

from . import HelpFormatter, description, program


def main(argv: Optional[List[str]] = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    overrides = _overrides(parser, args.set)

    from ..workflow.protocol import Protocol
    from ..workflow.run import RunSpec, run_one

    protocol = Protocol(
        patience_epochs=args.patience_epochs or None,
        max_epochs=args.max_epochs,
        batch_sentences=args.batch_sentences,
        max_steps=args.max_steps,
        eval_frequency=args.eval_frequency,
        tokens=args.tokens,
    )
    spec = RunSpec(
        dataset=args.dataset,
        scheme=args.scheme,
        seed=args.seed,
        output=args.output,
        corpus_dir=args.corpus,
        elmo_options=args.elmo_options or None,
        elmo_weights=args.elmo_weights or None,
        protocol=protocol,
        overrides=overrides,
        keep_model=args.keep_model,
        gpu_id=args.gpu_id,
        cache_dir=args.cache_dir or None,
        cache_dtype=args.cache_dtype,
        batch_words=args.batch_words or None,
        config=args.config,
        task=args.task,
        embed=args.embed,
        architecture=args.architecture,
    )
    print(json.dumps(run_one(spec), indent=2))
    return 0


def _parser() -> argparse.ArgumentParser:
    """The command's options (their values are checked by ``Protocol`` and ``RunSpec``)."""
    parser = argparse.ArgumentParser(
        prog=program("run"), description=description(__doc__), formatter_class=HelpFormatter
    )
    parser.add_argument(
        "--dataset",
        required=True,
        help="conll2003, wnut16, conll2000, arguments, ud_ewt, sst5, ud_ewt_parse, or your own (with --task)",
    )
    parser.add_argument(
        "--task",
        choices=["ner", "tagger", "textcat", "parser"],
        help="the task (needed for a data set that is not built in); textcat and parser: --architecture paper",
    )
    parser.add_argument(
        "--scheme",
        required=True,
        help="a paper scheme (layer1 layer2 layer3 concat average weighted weighted12) or baseline",
    )
    parser.add_argument("--seed", type=int, required=True, help="the random seed (0..2**32-1)")
    parser.add_argument("--output", required=True, help="the run folder (metrics.json is written there)")
    parser.add_argument("--corpus", default="corpus", help="folder with DATASET/{train,dev,test}.spacy")
    parser.add_argument("--elmo-options", default=None, help="options.json (path or URL); default: embedded model")
    parser.add_argument("--elmo-weights", default=None, help="weights.hdf5 (path or URL); default: embedded model")
    parser.add_argument(
        "--architecture",
        default="spacy",
        choices=["paper", "spacy"],
        help="paper: the paper's BiLSTM-CRF (configs/crf_*.cfg); spacy: spaCy's CNN with its transition-based NER or softmax tagger",
    )
    parser.add_argument(
        "--patience-epochs",
        type=int,
        default=0,
        help="train to convergence: score dev once per epoch, stop this many epochs after the best (the paper: 5); 0: a fixed budget of --max-steps",
    )
    parser.add_argument("--max-epochs", type=int, default=150, help="with --patience-epochs: the most epochs")
    parser.add_argument(
        "--batch-sentences",
        type=int,
        default=32,
        help="with --patience-epochs: sentences per batch (default: %(default)s, as in the paper)",
    )
    parser.add_argument("--max-steps", type=int, default=1000, help="without --patience-epochs: updates")
    parser.add_argument(
        "--eval-frequency", type=int, default=200, help="without --patience-epochs: dev scoring interval"
    )
    parser.add_argument(
        "--tokens",
        default="given",
        choices=["given", "retokenized"],
        help="train and score on the corpus's own tokens (given, spaCy's gold_preproc) or on spaCy's tokenization of its text",
    )
    parser.add_argument("--gpu-id", type=int, default=-1, help="the GPU to train on; -1: the CPU")
    parser.add_argument(
        "--cache-dir", default=None, help="shared ELMo layer cache (filled by the cache command); empty: memory only"
    )
    parser.add_argument(
        "--cache-dtype", default="float16", choices=["float16", "float32"], help="precision of the cache"
    )
    parser.add_argument(
        "--batch-words", type=int, default=0, help="fixed words per training batch (0: the config's schedule)"
    )
    parser.add_argument(
        "--embed",
        default="elmo",
        choices=["elmo", "elmo_hash"],
        help="the ELMo schemes' input: ELMo alone (elmo) or ELMo + spaCy's hash embeddings (elmo_hash); baseline runs are the same either way",
    )
    parser.add_argument(
        "--config",
        default=None,
        help="a config in configs/ instead of the task's, e.g. ner_elmo_hash.cfg (not with --embed elmo_hash)",
    )
    parser.add_argument("--keep-model", action="store_true", help="keep the trained pipeline (OUTPUT/training)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="change a setting of the training config, e.g. training.optimizer.learn_rate=0.002 (not one the run sets from its options)",
    )
    return parser


def _overrides(parser: argparse.ArgumentParser, items: List[str]) -> Dict[str, object]:
    """The config overrides of ``--set KEY=JSON`` ``items``; a value that is not JSON is a usage error."""
    overrides: Dict[str, object] = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            parser.error(f"--set {item!r}: the value must be JSON (strings in double quotes)")
    return overrides
