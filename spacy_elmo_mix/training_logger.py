"""``spacy-elmo-mix.LayerWeightsLogger.v1``: spaCy's console logger plus the learned layer weights."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import IO, Callable, Dict, Optional, Tuple

from spacy.language import Language
from spacy.util import registry

from .learned_weights import format_layer_weights, learned_layer_weights


@registry.loggers("spacy-elmo-mix.LayerWeightsLogger.v1")
def build_layer_weights_logger_v1(logger: Optional[Callable] = None, path: Optional[str] = None) -> Callable:
    """Wrap ``logger`` (default ``spacy.ConsoleLogger.v1``); at each evaluation, print the layer
    weights and gamma of every ELMo scheme, and append them with the step, epoch, losses and score as
    a JSON line to ``path`` if given (used by the workflow and the tests).
    """
    if logger is None:
        logger = registry.get("loggers", "spacy.ConsoleLogger.v1")()

    def setup(nlp: Language, stdout: IO = sys.stdout, stderr: IO = sys.stderr) -> Tuple[Callable, Callable]:
        log_step, finalize = logger(nlp, stdout, stderr)

        def log(info: Optional[Dict]) -> None:
            log_step(info)
            if info is None:
                return
            weights = learned_layer_weights(nlp)
            stdout.write(f"ELMo layer weights at step {info.get('step')}:\n{format_layer_weights(weights)}\n")
            if path:
                with Path(path).open("a", encoding="utf-8") as f:
                    record = {key: info.get(key) for key in ("step", "epoch", "losses", "score")}
                    f.write(json.dumps({**record, "weights": weights}, default=float) + "\n")

        return log, finalize

    return setup
