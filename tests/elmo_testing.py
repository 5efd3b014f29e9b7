"""Helpers shared by the spaCy-integration tests: small pipelines on the tiny fixture model."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import spacy
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example
from thinc.api import Adam, Config, fix_random_seed

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "configs"


def small_config(
    config_name: str,
    options_file: Path,
    weight_file: Path,
    scheme: str = "weighted",
    frozen: bool = True,
    width: int = 32,
    cache_memory_mb: float = 512,
) -> Config:
    """A config from ``configs/`` shrunk for tests, on the given biLM files.

    cache_memory_mb: the in-memory layer cache of the model and of training (``[initialize]``);
        0 turns it off, so every call computes the layers afresh.
    """
    task = "tagger" if config_name.startswith("tagger") else "ner"
    config = Config().from_disk(CONFIGS / config_name, interpolate=False)
    config["paths"]["elmo_options"] = str(options_file)
    config["paths"]["elmo_weights"] = str(weight_file)
    config = config.interpolate()
    config["components"]["elmo"]["model"]["frozen"] = frozen
    config["components"]["elmo"]["model"]["cache_memory_mb"] = cache_memory_mb
    config["initialize"]["components"]["elmo"]["cache_memory_mb"] = cache_memory_mb
    tok2vec = config["components"][task]["model"]["tok2vec"]
    tok2vec["elmo"]["mixer"]["name"] = scheme
    tok2vec["width"] = width
    tok2vec["encoder"]["width"] = width
    tok2vec["encoder"]["depth"] = 1
    return config


def elmo_only_nlp(model_files, scheme: Optional[dict] = None, **model_config) -> Language:
    """An initialized blank English pipeline with only the elmo component on ``model_files``.

    scheme: the component's scheme block (default: its fixed average); model_config: more settings
    of its ``spacy-elmo-mix.BiLM.v3`` block (``frozen``, ``cache_dir``, ``compute_dtype`` ...).
    """
    options, weights = model_files
    config = {"model": {"options_file": str(options), "weight_file": str(weights), **model_config}}
    if scheme is not None:
        config["scheme"] = scheme
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config=config)
    nlp.initialize()
    return nlp


def conll_examples(path: Path, n_sentences: int, nlp: Optional[Language] = None) -> List[Example]:
    """The first ``n_sentences`` sentences of a CoNLL-2003 file as NER examples (BIO tags)."""
    nlp = nlp or spacy.blank("en")
    examples, words, tags = [], [], []
    with path.open(encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if parts and parts[0] != "-DOCSTART-":
                words.append(parts[0])
                tags.append(parts[-1])
            elif words:
                examples.append(Example(Doc(nlp.vocab, words=words), Doc(nlp.vocab, words=words, ents=tags)))
                words, tags = [], []
                if len(examples) == n_sentences:
                    break
    return examples


def tagged_examples(ner_examples: List[Example]) -> List[Example]:
    """The same sentences with their NER BIO labels as tags (a tagging task on the same data)."""
    result = []
    for eg in ner_examples:
        ref = eg.reference
        tags = [f"{t.ent_iob_}-{t.ent_type_}" if t.ent_type_ else "O" for t in ref]
        result.append(
            Example(Doc(ref.vocab, words=[t.text for t in ref]), Doc(ref.vocab, words=[t.text for t in ref], tags=tags))
        )
    return result


def paper_config(name: str, model_files, width: int = 16, scheme: str = "weighted") -> Config:
    """A shipped config of the paper's network (``crf_*``, ``textcat``, ``parser``, their baselines)
    on the given biLM, with a one-layer BiLSTM of ``width`` units and no dropout."""
    config = Config().from_disk(CONFIGS / name, interpolate=False)
    config["paths"]["elmo_options"], config["paths"]["elmo_weights"] = map(str, model_files)
    config = config.interpolate()
    component = config["nlp"]["pipeline"][-1]
    tok2vec = config["components"][component]["model"]["tok2vec"]
    tok2vec.update({"width": width, "depth": 1, "dropout": 0.0, "recurrent_dropout": 0.0})
    if tok2vec.get("elmo"):
        tok2vec["elmo"]["mixer"]["name"] = scheme
        config["initialize"]["components"]["elmo"]["cache_memory_mb"] = 64
    return config


def trained(config: Config, examples, steps: int = 3) -> Language:
    """A pipeline built from ``config``, initialized on ``examples`` and updated ``steps`` times on them.

    examples: a list, or a function of the new pipeline that returns them (examples in its vocab,
        which the parser needs for the labels it adds).
    """
    fix_random_seed(0)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    examples = examples(nlp) if callable(examples) else examples
    nlp.initialize(lambda: examples)
    optimizer = Adam(0.01)
    for _ in range(steps):
        nlp.update(examples, sgd=optimizer)
    return nlp
