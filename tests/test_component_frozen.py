"""A sourced ``elmo`` component that is frozen and annotating feeds its listeners through the docs
(``doc._.elmo_layers``), as spaCy's Tok2VecListener does with ``doc.tensor``."""

from __future__ import annotations

import pytest
import spacy
from spacy.cli.train import train
from spacy.tokens import DocBin
from thinc.api import Config

from elmo_testing import CONFIGS, conll_examples, elmo_only_nlp, small_config


@pytest.mark.slow
def test_train_with_frozen_annotating_sourced_elmo(tiny_model_files, data_dir, tmp_path):
    source = tmp_path / "elmo_pipeline"
    elmo_only_nlp(tiny_model_files, cache_memory_mb=0).to_disk(source)
    docs = [eg.reference for eg in conll_examples(data_dir / "conll2003" / "train.txt", 24)]
    DocBin(docs=docs[:16]).to_disk(tmp_path / "train.spacy")
    DocBin(docs=docs[16:]).to_disk(tmp_path / "dev.spacy")
    config = Config().from_disk(CONFIGS / "ner.cfg", interpolate=False)
    config["components"]["elmo"] = {"source": str(source)}
    config["training"]["frozen_components"] = ["elmo"]
    config["training"]["annotating_components"] = ["elmo"]
    config["training"]["max_steps"] = 6
    config["training"]["eval_frequency"] = 3
    config["paths"].update(train=str(tmp_path / "train.spacy"), dev=str(tmp_path / "dev.spacy"))
    tok2vec = config["components"]["ner"]["model"]["tok2vec"]
    tok2vec["width"] = tok2vec["encoder"]["width"] = 32
    config.to_disk(tmp_path / "frozen.cfg")
    train(tmp_path / "frozen.cfg", tmp_path / "out")
    nlp = spacy.load(tmp_path / "out" / "model-last")
    doc = nlp("Peter Blackburn went to Brussels .")
    assert doc._.elmo_layers is None  # keep_layers "auto": the listener has read them
    kept = spacy.load(tmp_path / "out" / "model-last", config={"components": {"elmo": {"keep_layers": "float32"}}})
    assert kept("Peter Blackburn went to Brussels .")._.elmo_layers.shape[1] == len(doc)


def test_listener_reads_annotated_docs_in_training(tiny_model_files, data_dir):
    """nlp.update as spacy train runs it with elmo frozen and annotating; the mixer still learns."""
    nlp = spacy.util.load_model_from_config(
        small_config("ner.cfg", *tiny_model_files, cache_memory_mb=0), auto_fill=True
    )
    examples = conll_examples(data_dir / "conll2003" / "train.txt", 8, nlp)
    nlp.initialize(lambda: examples)
    mixer = nlp.get_pipe("ner").model.get_ref("tok2vec").layers[0].layers[0].mixer
    before = {name: mixer.get_param(name).copy() for name in mixer.param_names}
    optimizer = nlp.create_optimizer()
    for _ in range(2):
        losses = nlp.update(examples, sgd=optimizer, exclude=["elmo"], annotates=["elmo"])
    assert losses["ner"] > 0
    assert any((mixer.get_param(name) != value).any() for name, value in before.items())


def test_frozen_not_annotating_fails_clearly(tiny_model_files, data_dir):
    nlp = spacy.util.load_model_from_config(
        small_config("ner.cfg", *tiny_model_files, cache_memory_mb=0), auto_fill=True
    )
    examples = conll_examples(data_dir / "conll2003" / "train.txt", 4, nlp)
    nlp.initialize(lambda: examples)
    with pytest.raises(ValueError, match="received no layers.*annotating_components"):
        nlp.update(examples, exclude=["elmo"])


def test_listener_refuses_another_batch(tiny_model_files, data_dir):
    """The listener checks that the docs it is given are those the elmo component sent layers for,
    in the same order (each doc is paired with the layers at its position)."""
    nlp = spacy.util.load_model_from_config(
        small_config("ner.cfg", *tiny_model_files, cache_memory_mb=0), auto_fill=True
    )
    examples = conll_examples(data_dir / "conll2003" / "train.txt", 8, nlp)
    nlp.initialize(lambda: examples)
    elmo, ner = nlp.get_pipe("elmo"), nlp.get_pipe("ner")
    for batch in (examples[4:], examples[:4][::-1]):
        elmo.update(examples[:4])
        with pytest.raises(ValueError, match="Mismatched batch in the ELMo listener"):
            ner.update(batch)
    elmo.update(examples[:4])
    assert ner.update(examples[:4])["ner"] > 0
