"""The documented cache recipe (docs/cache.md) on the shipped configs, unmodified: fill the cache with
``python -m spacy_elmo_mix cache`` and its defaults, train with ``python -m spacy train`` and one
override naming the folder; training computes no ELMo layer and adds nothing to the cache."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import srsly
from spacy.cli import app
from thinc.api import Config
from typer.testing import CliRunner

from elmo_testing import CONFIGS
from spacy_elmo_mix.__main__ import main as elmo_mix_cli
from spacy_elmo_mix.cache import LayerCache
from spacy_elmo_mix.cache.index import HEADER
from spacy_elmo_mix.workflow.convert import convert_dataset

PROJECT = CONFIGS.parent / "project.yml"
# The configs and the cache options docs/cache.md pairs them with.
RECIPES = {"ner.cfg": [], "crf_ner.cfg": ["--gold-preproc"]}


@pytest.fixture(scope="module")
def corpus(data_dir, tmp_path_factory) -> Path:
    """40 sentences per split of CoNLL-2003 as ``train.spacy``, ``dev.spacy``, ``test.spacy``."""
    out = tmp_path_factory.mktemp("corpus")
    convert_dataset("conll2003", data_dir / "conll2003", out, max_sentences=40)
    return out


@pytest.fixture
def computed(monkeypatch):
    """Counts the layer-cache lookups (``lookups``), the sentences that had to be computed
    (``sentences``) and the cache folders that served them (``folders``); ``reset(counts)`` zeroes them."""
    counts = reset({})
    original = LayerCache.get_or_compute

    def counting(self, sentences, top_layer, compute):
        def compute_counted(missing):
            counts["sentences"] += len(missing)
            return compute(missing)

        counts["lookups"] += 1
        counts["folders"].add(self.path)
        return original(self, sentences, top_layer, compute_counted)

    monkeypatch.setattr(LayerCache, "get_or_compute", counting)
    return counts


def reset(counts: dict) -> dict:
    """``counts`` (of the ``computed`` fixture) back to nothing counted."""
    counts.update(lookups=0, sentences=0, folders=set())
    return counts


def cache_contents(cache_dir: Path):
    """(entries, total bytes) of a cache folder: the entries its index files list, all its files' bytes."""
    entries = sum(HEADER.unpack_from(path.read_bytes())[5] for path in cache_dir.rglob("shard-*.idx"))
    return entries, sum(path.stat().st_size for path in cache_dir.rglob("*") if path.is_file())


def fill_cache(corpus: Path, cache_dir: Path, options) -> None:
    """``python -m spacy_elmo_mix cache [options] --cache-dir cache_dir train.spacy dev.spacy``."""
    argv = ["cache", *options, "--cache-dir", str(cache_dir), str(corpus / "train.spacy"), str(corpus / "dev.spacy")]
    assert elmo_mix_cli(argv) == 0


def spacy_cli(*args: str):
    """Run ``python -m spacy ARGS`` (in this process); returns typer's result."""
    return CliRunner().invoke(app, [str(arg) for arg in args])


def train(config: Path, corpus: Path, *overrides: str) -> None:
    """``python -m spacy train config`` on the corpus for 2 steps, evaluating the dev set after each."""
    result = spacy_cli(
        "train",
        config,
        "--paths.train",
        corpus / "train.spacy",
        "--paths.dev",
        corpus / "dev.spacy",
        "--training.max_steps",
        "2",
        "--training.eval_frequency",
        "1",
        *overrides,
    )
    assert result.exit_code == 0, result.output[-3000:]


def assert_recomputes_nothing(config: Path, corpus: Path, cache_dir: Path, computed, *overrides: str) -> None:
    """Training with ``overrides`` reads every layer from ``cache_dir`` and leaves it as it was."""
    before = cache_contents(cache_dir)
    reset(computed)
    assert before[0] > 0 and before[1] > 0
    train(config, corpus, *overrides)
    assert cache_contents(cache_dir) == before
    assert computed["lookups"] > 0 and computed["folders"] <= set(cache_dir.iterdir())
    assert computed["sentences"] == 0


@pytest.mark.parametrize("config", RECIPES)
def test_the_documented_recipe_recomputes_nothing(corpus, tmp_path, monkeypatch, computed, config):
    cache_dir = tmp_path / "cache"
    fill_cache(corpus, cache_dir, RECIPES[config])
    monkeypatch.chdir(tmp_path)  # training writes nothing into the checkout
    assert_recomputes_nothing(
        CONFIGS / config, corpus, cache_dir, computed, "--initialize.components.elmo.cache_dir", cache_dir
    )


def test_a_filled_config_takes_the_cache_in_one_override(corpus, tmp_path, monkeypatch, computed):
    """``spacy init fill-config`` writes no ``[initialize.components.elmo]`` (spaCy fills no component's
    initialize settings), and spaCy overrides only keys of sections that exist: the documented override
    for such a config names the section, ``--initialize.components.elmo '{"cache_dir": ...}'``."""
    base = Config().from_disk(CONFIGS / "ner.cfg", interpolate=False)
    del base["initialize"]["components"]["elmo"]
    base.to_disk(tmp_path / "base.cfg")
    filled = tmp_path / "filled.cfg"
    result = spacy_cli("init", "fill-config", tmp_path / "base.cfg", filled)
    assert result.exit_code == 0, result.output[-3000:]
    assert "elmo" not in Config().from_disk(filled, interpolate=False)["initialize"]["components"]
    cache_dir = tmp_path / "cache"
    fill_cache(corpus, cache_dir, [])
    monkeypatch.chdir(tmp_path)
    refused = spacy_cli("train", filled, "--initialize.components.elmo.cache_dir", cache_dir)
    assert refused.exit_code != 0 and "not a section value that can be overridden" in refused.output
    override = json.dumps({"cache_dir": str(cache_dir)})
    assert_recomputes_nothing(filled, corpus, cache_dir, computed, "--initialize.components.elmo", override)


def test_the_project_caches_what_its_runs_read():
    """The workflow's cache steps store float16 (what ``run`` reads: its --cache-dtype default) and
    read the given tokens (--gold-preproc), as every ``run`` of the workflow trains with --tokens given."""
    from spacy_elmo_mix.cli.cache import _parser

    lines = [line for command in srsly.read_yaml(PROJECT)["commands"] for line in command["script"]]
    cache = "python -m spacy_elmo_mix cache "
    caches = [_parser().parse_args(shlex.split(line[len(cache) :])) for line in lines if line.startswith(cache)]
    runs = [line for line in lines if "python -m spacy_elmo_mix run " in line]
    assert len(caches) == 4 and len(runs) >= 4
    assert all(args.dtype == "float16" and args.gold_preproc for args in caches)
    assert all("--tokens given" in run and "--cache-dtype" not in run for run in runs)
