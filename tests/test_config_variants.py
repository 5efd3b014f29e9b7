"""The shipped configs are complete files (``spacy train`` reads one file; thinc configs have no
includes), so each is declared here as a variant of another: it may differ from its base only in
the settings named, and must differ in each of them. A setting changed in one config and not in its
variants (the biLM block, the optimizer, the protocol's batching) fails here."""

from __future__ import annotations

from typing import Dict, List, Tuple

import pytest
from thinc.api import Config

from elmo_testing import CONFIGS

# variant: (base, the base's task component -> the variant's, where the two differ: setting prefixes)
NO_ELMO = ["nlp.pipeline", "components.elmo", "initialize.components.elmo"]
VARIANTS: Dict[str, Tuple[str, Dict[str, str], List[str]]] = {
    "ner_baseline.cfg": ("ner.cfg", {}, NO_ELMO + ["components.ner.model.tok2vec", "training.logger"]),
    "ner_elmo_hash.cfg": ("ner.cfg", {}, ["components.ner.model.tok2vec"]),
    "tagger.cfg": (
        "ner.cfg",
        {"ner": "tagger"},
        ["nlp.pipeline", "components.tagger", "training.score_weights"],
    ),
    "tagger_baseline.cfg": ("tagger.cfg", {}, NO_ELMO + ["components.tagger.model.tok2vec", "training.logger"]),
    "tagger_elmo_hash.cfg": ("tagger.cfg", {}, ["components.tagger.model.tok2vec"]),
    "crf_ner.cfg": (
        "ner.cfg",
        {"ner": "crf_ner"},
        ["nlp.pipeline", "components.crf_ner", "corpora.train.gold_preproc", "corpora.dev.gold_preproc", "training"],
    ),
    "crf_ner_baseline.cfg": ("crf_ner.cfg", {}, NO_ELMO + ["components.crf_ner.model.tok2vec"]),
    "crf_tagger.cfg": (
        "crf_ner.cfg",
        {"crf_ner": "crf_tagger"},
        ["nlp.pipeline", "components.crf_tagger.factory", "components.crf_tagger.tag_scheme"]
        + ["components.crf_tagger.scorer", "training.score_weights"],
    ),
    "crf_tagger_baseline.cfg": ("crf_tagger.cfg", {}, NO_ELMO + ["components.crf_tagger.model.tok2vec"]),
    "textcat.cfg": (
        "crf_ner.cfg",
        {"crf_ner": "textcat"},
        ["nlp.pipeline", "components.textcat.factory", "components.textcat.tag_scheme", "components.textcat.threshold"]
        + ["components.textcat.scorer", "components.textcat.model.@architectures"]
        + ["components.textcat.model.exclusive_classes", "components.textcat.model.use_reduce_"]
        + ["training.score_weights"],
    ),
    "textcat_baseline.cfg": ("textcat.cfg", {}, NO_ELMO + ["components.textcat.model.tok2vec"]),
    "parser.cfg": (
        "crf_ner.cfg",
        {"crf_ner": "parser"},
        ["nlp.pipeline", "components.parser.factory", "components.parser.tag_scheme", "components.parser.scorer"]
        + ["components.parser.learn_tokens", "components.parser.min_action_freq", "components.parser.moves"]
        + ["components.parser.update_with_oracle_cut_size", "components.parser.model.@architectures"]
        + ["components.parser.model.state_type", "components.parser.model.extra_state_tokens"]
        + ["components.parser.model.hidden_width", "components.parser.model.maxout_pieces"]
        + ["components.parser.model.use_upper", "training.score_weights"],
    ),
    "parser_baseline.cfg": ("parser.cfg", {}, NO_ELMO + ["components.parser.model.tok2vec"]),
}


def _flat(node, prefix: str = "") -> Dict[str, object]:
    """A config as ``{"section.key": value}`` (uninterpolated, so ``${...}`` references compare as text)."""
    flat: Dict[str, object] = {}
    for key, value in node.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _load(name: str, renames: Dict[str, str]) -> Dict[str, object]:
    """Config ``name`` flattened, its components renamed by ``renames`` (sections and references)."""
    text = (CONFIGS / name).read_text(encoding="utf-8")
    for old, new in renames.items():
        text = text.replace(f"components.{old}.", f"components.{new}.").replace(
            f"[components.{old}]", f"[components.{new}]"
        )
    return _flat(Config().from_str(text, interpolate=False))


def _differences(variant: str) -> List[str]:
    base, renames, _ = VARIANTS[variant]
    ours, theirs = _load(variant, {}), _load(base, renames)
    return sorted(key for key in set(ours) | set(theirs) if ours.get(key, KeyError) != theirs.get(key, KeyError))


def test_every_shipped_config_is_a_declared_variant_or_a_base():
    bases = {base for base, _, _ in VARIANTS.values()}
    assert {p.name for p in CONFIGS.glob("*.cfg")} == set(VARIANTS) | {"ner.cfg"}
    assert bases <= set(VARIANTS) | {"ner.cfg"}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_variant_differs_from_its_base_only_where_it_says(variant):
    declared = VARIANTS[variant][2]
    differences = _differences(variant)
    undeclared = [key for key in differences if not any(key.startswith(prefix) for prefix in declared)]
    assert not undeclared, f"{variant} differs from {VARIANTS[variant][0]} in undeclared settings"
    stale = [prefix for prefix in declared if not any(key.startswith(prefix) for key in differences)]
    assert not stale, f"{variant} is declared to differ in {stale} but does not"


def test_the_bilm_block_is_the_same_in_every_elmo_config():
    blocks = {}
    for path in sorted(CONFIGS.glob("*.cfg")):
        block = {
            k: v
            for k, v in _load(path.name, {}).items()
            if k.startswith(("components.elmo.", "initialize.components.elmo."))
        }
        if block:
            blocks[path.name] = block
    assert len(blocks) == 8, sorted(blocks)
    first = next(iter(blocks.values()))
    assert all(block == first for block in blocks.values())
