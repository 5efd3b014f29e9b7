"""The CRF labellers under hostile input: bad gold tags and emissions get a clear error, decoding
is valid whatever finite or -inf scores it gets, and a damaged saved component names its file."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import spacy
import srsly
import torch
from test_crf import _brute, _valid

from elmo_testing import conll_examples, paper_config, trained
from spacy_elmo_mix.errors import ElmoConfigError, ElmoFileError
from spacy_elmo_mix.layers.torch_layer import torch_module
from spacy_elmo_mix.tagging.crf import LinearChainCRF
from spacy_elmo_mix.tagging.tag_schemes import allowed_transitions, tag_names

TAGS = tag_names(["PER", "LOC"], "BIO")  # O B-PER I-PER B-LOC I-LOC
ALLOWED = tuple(torch.from_numpy(a) for a in allowed_transitions(TAGS, "BIO"))
F32_MAX = float(np.finfo(np.float32).max)


@pytest.fixture(scope="module")
def ner_examples(data_dir):
    return conll_examples(data_dir / "conll2003" / "train.txt", 16)


def _crf(seed: int = 0) -> LinearChainCRF:
    crf = LinearChainCRF(len(TAGS), ALLOWED)
    with torch.no_grad():
        for p in (crf.transitions, crf.start, crf.end):
            p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(seed)))
    return crf


def test_gold_tag_out_of_range_is_a_clear_error():
    crf = _crf()
    emissions, lengths = torch.randn(2, 3, len(TAGS)), torch.tensor([3, 2])
    for bad in (len(TAGS), -2):
        tags = torch.zeros(2, 3, dtype=torch.long)
        tags[1, 1] = bad
        with pytest.raises(ValueError, match=f"tag index {bad} at sentence 1, position 1"):
            crf.nll(emissions, tags, lengths)
    tags = torch.zeros(2, 3, dtype=torch.long)
    tags[1, 2] = 99  # padding: never read
    assert torch.isfinite(crf.nll(emissions, tags, lengths)).all()


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_emissions_are_a_clear_error(bad):
    crf = _crf()
    emissions, lengths = torch.randn(2, 3, len(TAGS)), torch.tensor([3, 2])
    emissions[0, 2, 1] = bad
    for call in (lambda: crf.decode(emissions, lengths), lambda: crf.nll(emissions, torch.zeros(2, 3, dtype=torch.long), lengths)):  # fmt: skip
        with pytest.raises(ValueError, match="emission at sentence 0, position 2 is not finite"):
            call()


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_transitions_are_a_clear_error(bad):
    crf = _crf()
    with torch.no_grad():
        crf.transitions[0, 0] = bad
    with pytest.raises(ValueError, match="transitions scores are not finite"):
        crf.decode(torch.randn(1, 3, len(TAGS)), torch.tensor([3]))


@pytest.mark.parametrize("seed", range(40))
def test_constrained_decoding_is_valid_for_any_scores(seed):
    """Property: random emissions mixing ordinary values, values at the float32 limits and -inf
    give a valid path with the best valid score, or, where no valid sequence has a finite score,
    a clear error; NaN and +inf are errors (tested above)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 6))
    kind = rng.integers(0, 4, size=(n, len(TAGS)))
    values = np.where(
        kind == 0, rng.normal(0, 3, kind.shape), np.where(kind == 1, F32_MAX, np.where(kind == 2, -F32_MAX, -np.inf))
    )
    values = values.astype(np.float32)
    crf = _crf(seed)
    emissions = torch.from_numpy(values).unsqueeze(0)
    _, valid_scores = _brute(crf, torch.from_numpy(values.astype(np.float64)), n)  # the valid sequences, float64
    best = float(valid_scores.max()) if len(valid_scores) else -np.inf
    if not np.isfinite(best):
        with pytest.raises(ValueError, match="no valid tag sequence"):
            crf.decode(emissions, torch.tensor([n]))
        return
    path, score = crf.decode(emissions, torch.tensor([n]))
    assert _valid(path[0, :n].tolist(), ALLOWED)
    # the score in the emissions' dtype: beyond float32's range it is +-inf, the path still valid
    want = best if abs(best) <= F32_MAX else np.copysign(np.inf, best)
    assert float(score[0]) == pytest.approx(want, rel=1e-6)


def test_a_loss_never_silently_leaves_a_sentence_out(tiny_model_files, ner_examples):
    nlp = trained(paper_config("crf_ner.cfg", tiny_model_files), ner_examples, steps=1)
    crf = nlp.get_pipe("crf_ner")
    eg = ner_examples[0]
    emissions = crf.model.predict([eg.predicted])
    emissions[0][0, 0] = np.nan
    with pytest.raises(ValueError, match="not finite"):
        crf.get_loss([eg], emissions)


# ---------------------------------------------------------------------------------------------
# Damaged saved components
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def saved(tiny_model_files, ner_examples, tmp_path_factory):
    nlp = trained(paper_config("crf_ner.cfg", tiny_model_files), ner_examples, steps=2)
    path = tmp_path_factory.mktemp("crf") / "nlp"
    nlp.to_disk(path)
    return path


def _damaged(saved, tmp_path, change):
    copy = tmp_path / "nlp"
    shutil.copytree(saved, copy)
    change(copy / "crf_ner")
    return copy


def _truncate(folder):
    data = (folder / "model").read_bytes()
    (folder / "model").write_bytes(data[: len(data) // 2])


def _one_label_short(folder):
    cfg = srsly.read_json(folder / "cfg")
    cfg["labels"] = cfg["labels"][:-1]
    srsly.write_json(folder / "cfg", cfg)


def _target(folder):
    cfg = srsly.read_json(folder / "cfg")
    cfg.update(target="tags", tag_scheme="tags")
    srsly.write_json(folder / "cfg", cfg)


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda f: (f / "model").write_bytes(b""), "model: missing or empty"),
        (_truncate, "model: cannot be loaded"),
        (lambda f: (f / "cfg").write_text("{not json", encoding="utf-8"), "cfg: not a valid crf_ner settings file"),
        (_one_label_short, "the CRF has 9 tags, its labels give 7"),
        (_target, "saved for target 'tags'"),
    ],
    ids=["empty-model", "truncated-model", "garbage-cfg", "labels-one-short", "other-target"],
)
def test_a_damaged_file_is_named(saved, tmp_path, change, message):
    path = _damaged(saved, tmp_path, change)
    with pytest.raises(ElmoFileError, match=message) as info:
        spacy.load(path)
    assert str(path / "crf_ner") in str(info.value)


def test_non_finite_saved_transitions_are_refused_and_constraints_derived_anew(saved, tmp_path):
    nlp = spacy.load(saved)
    crf = torch_module(nlp.get_pipe("crf_ner").model.get_ref("crf"))
    expected = [b.clone() for b in (crf.allowed_start, crf.allowed_transitions, crf.allowed_end)]
    with torch.no_grad():
        for buffer in (crf.allowed_start, crf.allowed_transitions, crf.allowed_end):
            buffer.fill_(True)  # a damaged file that allows everything
    nlp.to_disk(tmp_path / "loose")
    loaded = torch_module(spacy.load(tmp_path / "loose").get_pipe("crf_ner").model.get_ref("crf"))
    for buffer, want in zip((loaded.allowed_start, loaded.allowed_transitions, loaded.allowed_end), expected):
        assert torch.equal(buffer, want)
    with torch.no_grad():
        crf.transitions[0, 1] = float("nan")
    nlp.to_disk(tmp_path / "nan")
    with pytest.raises(ElmoFileError, match="transitions scores are not all finite"):
        spacy.load(tmp_path / "nan")
    with pytest.raises(ElmoFileError, match="bytes"):
        nlp.get_pipe("crf_ner").from_bytes(b"\x00\x01garbage")


def test_settings_errors_are_the_package_errors(tiny_model_files):
    config = paper_config("crf_ner.cfg", tiny_model_files)
    config["components"]["crf_ner"]["tag_scheme"] = "BIOES"
    with pytest.raises(ElmoConfigError, match="tag_scheme"):
        spacy.util.load_model_from_config(config, auto_fill=True)
