"""``python -m spacy_elmo_mix weights PIPELINE_DIR``: the learned ELMo layer weights per component."""

from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional

from . import HelpFormatter, description, program


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog=program("weights"), description=description(__doc__), formatter_class=HelpFormatter
    )
    parser.add_argument("pipeline", help="a trained pipeline directory (e.g. training/model-best)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)

    import spacy

    from ..learned_weights import format_layer_weights, learned_layer_weights

    try:
        nlp = spacy.load(args.pipeline)
    except (OSError, IOError) as exc:
        print(f"error: cannot load pipeline {args.pipeline}: {exc}", file=sys.stderr)
        return 1
    weights = learned_layer_weights(nlp)
    print(json.dumps(weights, indent=2) if args.json else format_layer_weights(weights))
    return 0
