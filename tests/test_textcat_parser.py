"""spaCy's ``textcat`` and ``parser`` over an ELMo listener: the shipped configs train with ``spacy
train`` on SST-5 and UD EWT slices, save/load and ``replace_listeners`` keep every prediction, spaCy's
own text classifiers take the listener as their tok2vec, and the accuracy scorer counts right."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import spacy
from spacy.cli.train import train
from spacy.tokens import Doc, DocBin
from spacy.training import Corpus, Example
from spacy.util import registry
from thinc.api import Config

from elmo_testing import CONFIGS, paper_config, trained
from spacy_elmo_mix.scorers import textcat_accuracy
from spacy_elmo_mix.workflow.convert import convert_dataset

TASKS = {"textcat": "sst5", "parser": "ud_ewt_parse"}
SOURCES = {"sst5": "sst5", "ud_ewt_parse": "ud_ewt"}


@pytest.fixture(scope="module")
def corpora(data_dir, tmp_path_factory):
    """``{dataset: corpus folder}``: 60 sentences of each split of SST-5 and UD EWT's trees."""
    out = tmp_path_factory.mktemp("corpora")
    for dataset, source in SOURCES.items():
        convert_dataset(dataset, data_dir / source, out / dataset, max_sentences=60)
    return out


def _examples(corpora, task, split="train", nlp=None):
    """The examples of ``task``'s corpus split, in ``nlp``'s vocab (default: a blank one's)."""
    return list(Corpus(corpora / TASKS[task] / f"{split}.spacy", gold_preproc=True)(nlp or spacy.blank("en")))


def _predictions(task, docs):
    """What ``task`` set on ``docs``: class scores, or each token's head and relation."""
    if task == "textcat":
        return [sorted(doc.cats.items()) for doc in docs]
    return [[(token.head.i, token.dep_) for token in doc] for doc in docs]


def _texts(examples):
    return [eg.reference.text for eg in examples]


@pytest.mark.parametrize("task", sorted(TASKS))
def test_spacy_train_runs_the_shipped_config(task, tiny_model_files, corpora, tmp_path):
    """``spacy train`` with the shipped config: the loss falls, the task's score is reported, the
    learned layer weights move, and the saved pipeline predicts."""
    dataset = corpora / TASKS[task]
    config = paper_config(f"{task}.cfg", tiny_model_files)
    for split in ("train", "dev"):
        config["corpora"][split]["path"] = str(dataset / f"{split}.spacy")
    config["training"].update({"max_epochs": 0, "max_steps": 40, "eval_frequency": 10, "patience": 0})
    config["training"]["logger"]["path"] = str(tmp_path / "log.jsonl")
    config.to_disk(tmp_path / "config.cfg")
    train(tmp_path / "config.cfg", tmp_path / "out")
    records = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    losses = [r["losses"][task] for r in records if r["step"] > 0]
    assert len(losses) == 4 and losses[-1] < losses[0]
    mix = records[-1]["weights"][task][0]
    assert max(abs(w - 1 / 3) for w in mix["weights"]) > 1e-5 or abs(mix["gamma"] - 1.0) > 1e-5
    nlp = spacy.load(tmp_path / "out" / "model-last")
    metric = "cats_acc" if task == "textcat" else "dep_las"
    evaluated = subprocess.run(
        [sys.executable, "-m", "spacy", "evaluate", str(tmp_path / "out" / "model-last"), str(dataset / "dev.spacy")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert evaluated.returncode == 0, evaluated.stderr
    assert ("TEXTCAT (accuracy)" if task == "textcat" else "LAS") in evaluated.stdout
    assert 0.0 <= nlp.meta["performance"][metric] <= 1.0
    assert nlp.meta["performance"][metric] == pytest.approx(records[-1]["score"])
    assert nlp.pipe_names == ["elmo", task]
    docs = list(nlp.pipe(_texts(_examples(corpora, task, "dev"))))
    if task == "textcat":
        assert all(sorted(doc.cats) == ["1", "2", "3", "4", "5"] for doc in docs)
        assert all(abs(sum(doc.cats.values()) - 1.0) < 1e-5 for doc in docs)
    else:
        assert all(doc.has_annotation("DEP") for doc in docs)


@pytest.mark.parametrize("task", sorted(TASKS))
def test_save_load_and_replace_listeners_keep_predictions(task, tiny_model_files, corpora, tmp_path):
    nlp = trained(paper_config(f"{task}.cfg", tiny_model_files), lambda nlp: _examples(corpora, task, nlp=nlp)[:24])
    texts = _texts(_examples(corpora, task, "dev")[:20])
    before = _predictions(task, nlp.pipe(texts))
    nlp.to_disk(tmp_path / "pipeline")
    assert _predictions(task, spacy.load(tmp_path / "pipeline").pipe(texts)) == before
    nlp.replace_listeners("elmo", task, ["model.tok2vec.elmo"])
    nlp.remove_pipe("elmo")
    assert _predictions(task, nlp.pipe(texts)) == before
    assert (
        nlp.config["components"][task]["model"]["tok2vec"]["elmo"]["@architectures"] == "spacy-elmo-mix.ElmoInline.v1"
    )
    nlp.to_disk(tmp_path / "inline")
    assert _predictions(task, spacy.load(tmp_path / "inline").pipe(texts)) == before


@pytest.mark.parametrize("task", sorted(TASKS))
def test_serializes_before_initialize(task, tiny_model_files, tmp_path):
    config = paper_config(f"{task}.cfg", tiny_model_files)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    nlp.to_disk(tmp_path / "fresh")
    loaded = spacy.load(tmp_path / "fresh")
    assert loaded.pipe_names == ["elmo", task]
    assert loaded.config["components"][task] == nlp.config["components"][task]


@pytest.mark.parametrize("task", sorted(TASKS))
def test_baseline_config_needs_no_elmo(task, corpora):
    config = paper_config(f"{task}_baseline.cfg", (None, None))
    nlp = trained(config, lambda nlp: _examples(corpora, task, nlp=nlp)[:16], steps=2)
    assert nlp.pipe_names == [task]
    scores = nlp.evaluate(_examples(corpora, task, "dev")[:16])
    assert scores["cats_acc" if task == "textcat" else "dep_las"] is not None


REDUCE = {
    "@architectures": "spacy.TextCatReduce.v1",
    "exclusive_classes": True,
    "use_reduce_first": True,
    "use_reduce_last": False,
    "use_reduce_max": False,
    "use_reduce_mean": True,
}
CNN = {"@architectures": "spacy.TextCatCNN.v2", "exclusive_classes": True}


@pytest.mark.parametrize("architecture", [REDUCE, CNN], ids=["TextCatReduce", "TextCatCNN"])
def test_spacy_text_classifiers_take_the_listener(architecture, tiny_model_files, corpora):
    """spaCy's own textcat architectures over ``ElmoListener.v1`` directly (no BiLSTM): it trains
    (the loss falls) and its mixer learns."""
    config = Config().from_disk(CONFIGS / "textcat.cfg", interpolate=False)
    config["paths"]["elmo_options"], config["paths"]["elmo_weights"] = map(str, tiny_model_files)
    config = config.interpolate()
    listener = config["components"]["textcat"]["model"]["tok2vec"]["elmo"]
    config["components"]["textcat"]["model"] = {**architecture, "tok2vec": listener}
    examples = _examples(corpora, "textcat")[:32]
    nlp = trained(config, examples, steps=0)
    optimizer, losses = nlp.create_optimizer(), []
    for _ in range(6):
        losses.append(nlp.update(examples, sgd=optimizer)["textcat"])
    assert losses[-1] < losses[0]
    mixer = nlp.get_pipe("textcat").model.get_ref("tok2vec").mixer
    logits = [node.get_param("s") for node in mixer.walk() if node.has_param("s")]
    assert logits and not np.allclose(logits[0], logits[0][0])  # the weights no longer equal
    doc = nlp("a good film")
    assert sorted(doc.cats) == ["1", "2", "3", "4", "5"]


def _example(gold, predicted):
    vocab = spacy.blank("en").vocab
    reference = Doc(vocab, words=["w"])
    reference.cats = {label: float(label == gold) for label in "abc"}
    doc = Doc(vocab, words=["w"])
    doc.cats = predicted
    return Example(doc, reference)


def test_accuracy_counts_the_highest_class():
    examples = [
        _example("a", {"a": 0.5, "b": 0.3, "c": 0.2}),  # right
        _example("b", {"a": 0.5, "b": 0.3, "c": 0.2}),  # wrong
        _example("c", {"a": 0.1, "b": 0.1, "c": 0.8}),  # right
        _example("a", {}),  # no prediction: wrong
    ]
    assert textcat_accuracy(examples) == 0.5
    assert textcat_accuracy([_example("b", {"a": 0.4, "b": 0.4, "c": 0.2})]) == 0.0  # a tie: the first class


def test_accuracy_leaves_out_docs_without_one_gold_class():
    unlabelled = _example("a", {"a": 1.0})
    unlabelled.reference.cats = {"a": 0.0, "b": 0.0}
    assert textcat_accuracy([unlabelled]) is None
    assert textcat_accuracy([unlabelled, _example("a", {"a": 0.9, "b": 0.1})]) == 1.0


def test_registered_scorer_adds_accuracy_to_spacys_scores():
    scorer = registry.scorers.get("spacy-elmo-mix.textcat_scorer.v1")()
    examples = [_example("a", {"a": 0.6, "b": 0.3, "c": 0.1}), _example("b", {"a": 0.6, "b": 0.3, "c": 0.1})]
    scores = scorer(examples, labels=["a", "b", "c"])
    assert scores["cats_acc"] == scores["cats_score"] == 0.5 and scores["cats_score_desc"] == "accuracy"
    assert scores["cats_macro_f"] == pytest.approx((2 / 3 + 0 + 0) / 3)  # a: P 1/2 R 1; b: R 0; c: no gold


def test_sst5_corpus_has_one_class_per_sentence(corpora):
    docs = list(DocBin().from_disk(corpora / "sst5" / "dev.spacy").get_docs(spacy.blank("en").vocab))
    assert len(docs) == 60
    assert all(sorted(doc.cats.values()) == [0.0, 0.0, 0.0, 0.0, 1.0] for doc in docs)
