"""One run of the scheme comparison: train a pipeline for (dataset, scheme, seed), evaluate it on
the test set and write ``metrics.json`` (the layout ``compare`` reads).

The task per dataset: NER (F1 of entities) for ``conll2003``, ``wnut16`` and ``conll2000`` (chunks
as spans); POS tagging (accuracy) for ``ud_ewt``. Any other data set names its task (``ner`` or
``tagger``). The architecture: ``paper``, the paper's BiLSTM-CRF (``configs/crf_ner.cfg``,
``crf_tagger.cfg``), or ``spacy``, spaCy's CNN with its transition-based NER or softmax tagger
(``configs/ner.cfg``, ``tagger.cfg``). How long it trains is its :class:`~.protocol.Protocol`. The scheme is a column of the paper's
Table 1 (``spacy-elmo-mix.PaperScheme.v1`` name), or ``baseline``: the same task without ELMo
(spaCy's hash embeddings, ``configs/*_baseline.cfg``). ``metrics.json`` records the run's identity
(``spacy_elmo_mix.workflow.identity``): the grid's command, the resolved settings, and the sha256 of
the corpus, config and biLM files, and where it ran (``environment.py``: package version and
checkout, CPU), which is not part of the identity.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Union, cast

from ..atomic import write_text_atomic
from ..errors import ElmoFileError, ElmoInputError
from ..layers.scalar_mix import PAPER_SCHEMES
from .convert import load_datasets
from .environment import run_environment
from .identity import COMMAND_ENV, make_identity
from .protocol import TRAIN_LOG, Protocol, how_it_ended

PathLike = Union[str, Path]
# The training configs, shipped as package data (the project's top-level ``configs`` links here).
CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"


@dataclass(frozen=True)
class Task:
    """How a dataset is trained and scored: its configs (ELMo alone, ELMo + hash embeddings, the no-ELMo
    baseline), component and score key."""

    config: str
    hash_config: Optional[str]
    baseline_config: str
    component: str
    metric: str

    def config_for(self, scheme: str, embed: str) -> str:
        """The config of a run: the baseline's for ``baseline``, else the one of ``embed`` (EMBEDS)."""
        if scheme == BASELINE:
            return self.baseline_config
        if embed == ELMO_HASH and self.hash_config is None:
            raise ElmoInputError(f"embed {ELMO_HASH!r} has no config for {self.config}; give one with --config")
        return cast(str, self.hash_config) if embed == ELMO_HASH else self.config  # not None: checked above


BASELINE = "baseline"
SCHEMES = (*PAPER_SCHEMES, BASELINE)
# What the ELMo runs feed the task model: ELMo alone, or ELMo concatenated with spaCy's hash embeddings
# (the baseline's own features, as Peters et al. concatenate ELMo with the task's word representation).
ELMO, ELMO_HASH = "elmo", "elmo_hash"
EMBEDS = (ELMO, ELMO_HASH)
ARCHITECTURES = ("paper", "spacy")
TASK_KINDS: Dict[str, Dict[str, Task]] = {
    "spacy": {
        "ner": Task("ner.cfg", "ner_elmo_hash.cfg", "ner_baseline.cfg", "ner", "ents_f"),
        "tagger": Task("tagger.cfg", "tagger_elmo_hash.cfg", "tagger_baseline.cfg", "tagger", "tag_acc"),
    },
    "paper": {
        "ner": Task("crf_ner.cfg", None, "crf_ner_baseline.cfg", "crf_ner", "ents_f"),
        "tagger": Task("crf_tagger.cfg", None, "crf_tagger_baseline.cfg", "crf_tagger", "tag_acc"),
        "textcat": Task("textcat.cfg", None, "textcat_baseline.cfg", "textcat", "cats_acc"),
        "parser": Task("parser.cfg", None, "parser_baseline.cfg", "parser", "dep_las"),
    },
}
# Every task of some architecture (the ``--task`` choices).
TASK_NAMES = tuple(dict.fromkeys(kind for tasks in TASK_KINDS.values() for kind in tasks))
# The task of each built-in data set (configs/datasets.json); any other data set is run with an explicit task.
DATASET_TASKS: Dict[str, str] = {name: spec.task for name, spec in load_datasets().items()}


def task_for(dataset: str, task: Optional[str] = None, architecture: str = "spacy") -> Task:
    """The :class:`Task` of ``dataset`` in ``architecture``: ``task`` (one of :data:`TASK_NAMES`) if
    given, else the built-in one's."""
    if architecture not in ARCHITECTURES:
        raise ElmoInputError(f"unknown architecture {architecture!r}; choose one of {', '.join(ARCHITECTURES)}")
    kind = task or DATASET_TASKS.get(dataset)
    if kind is None:
        raise ElmoInputError(
            f"dataset {dataset!r} is not built in ({', '.join(DATASET_TASKS)}): give its task (--task {'|'.join(TASK_NAMES)})"
        )
    if kind not in TASK_KINDS[architecture]:
        others = [name for name, tasks in TASK_KINDS.items() if kind in tasks]
        where = (
            f" (task {kind!r} has the {others[0]!r} architecture only: --architecture {others[0]})" if others else ""
        )
        raise ElmoInputError(
            f"{dataset}: the {architecture!r} architecture has no task {kind!r}; choose one of "
            f"{', '.join(TASK_KINDS[architecture])}{where}"
        )
    return TASK_KINDS[architecture][kind]


def check_scheme(scheme: str) -> str:
    """``scheme`` if it is a paper scheme or ``baseline``; ElmoInputError listing them otherwise."""
    if scheme not in SCHEMES:
        raise ElmoInputError(f"unknown scheme {scheme!r}; choose one of {', '.join(SCHEMES)}")
    return scheme


@dataclass(frozen=True)
class RunSpec:
    """One run of the comparison: what :func:`run_one` trains, scores and records. Creating one checks
    every value that needs no file (ElmoInputError); the corpus and config files are checked when it runs.

    dataset: a built-in data set (:data:`DATASET_TASKS`) or your own (with ``task``).
    scheme: a paper scheme (``spacy-elmo-mix.PaperScheme.v1`` name) or ``baseline``.
    seed: the random seed (0..2**32-1).
    output: the run folder (``metrics.json``, the training log; ``training`` while it trains).
    corpus_dir: folder with ``{dataset}/train.spacy``, ``dev.spacy``, ``test.spacy`` (``convert``).
    elmo_options, elmo_weights: biLM files, both or neither (None: the embedded default model).
    protocol: how long it trains and on which tokens (:class:`~.protocol.Protocol`).
    config_dir: the folder of the training configs (the package's).
    overrides: further ``spacy train`` config overrides (of settings the run does not set itself).
    keep_model: keep ``output/training`` (its ``model-best`` is the pipeline scored).
    gpu_id: the GPU to train on; -1 for CPU.
    cache_dir, cache_dtype: the shared on-disk ELMo layer cache (``python -m spacy_elmo_mix cache``
        fills it once per data set, so the runs do no biLM work); None: memory only.
    batch_words: words per training batch (a fixed size instead of the config's compounding one;
        the ``steps`` protocol only: the ``converge`` protocol batches sentences); None or 0: the config's.
    config: a config file name in ``config_dir`` instead of the task's (e.g. ``ner_elmo_hash.cfg``;
        it names the embedding itself, so only with ``embed`` ``elmo``).
    task: one of :data:`TASK_NAMES`; needed for a data set that is not built in.
    embed: ``elmo`` (the ELMo schemes see ELMo alone) or ``elmo_hash`` (ELMo concatenated with the
        baseline's hash embeddings); ``baseline`` runs are the same either way.
    architecture: ``paper`` (BiLSTM-CRF) or ``spacy`` (CNN; transition-based NER / softmax tagger).
    """

    dataset: str
    scheme: str
    seed: int
    output: PathLike
    corpus_dir: PathLike
    elmo_options: Optional[str] = None
    elmo_weights: Optional[str] = None
    protocol: Protocol = Protocol()
    config_dir: PathLike = CONFIG_DIR
    overrides: Optional[Dict[str, object]] = None
    keep_model: bool = False
    gpu_id: int = -1
    cache_dir: Optional[str] = None
    cache_dtype: str = "float16"
    batch_words: Optional[int] = None
    config: Optional[str] = None
    task: Optional[str] = None
    embed: str = ELMO
    architecture: str = "spacy"

    def __post_init__(self) -> None:
        if bool(self.elmo_options) != bool(self.elmo_weights):
            raise ElmoInputError("give both elmo_options and elmo_weights, or neither")
        if not 0 <= self.seed < 2**32:
            raise ElmoInputError(f"seed must be in 0..2**32-1, got {self.seed}")
        if self.gpu_id < -1:
            raise ElmoInputError(f"gpu_id must be -1 (CPU) or a device number, got {self.gpu_id}")
        if self.batch_words is not None and self.batch_words < 0:
            raise ElmoInputError(f"batch_words must be 0 (the config's schedule) or positive, got {self.batch_words}")
        if self.batch_words and self.protocol.converges:
            raise ElmoInputError("batch_words: the converge protocol batches sentences (batch_sentences), not words")
        if self.embed not in EMBEDS:
            raise ElmoInputError(f"unknown embed {self.embed!r}; choose one of {', '.join(EMBEDS)}")
        if self.config and self.embed != ELMO:
            raise ElmoInputError(f"config {self.config} names the config itself: leave out embed {self.embed}")
        check_scheme(self.scheme)
        task_for(self.dataset, self.task, self.architecture)  # a known architecture, and a task in it

    @property
    def corpus(self) -> Path:
        """The folder of the run's ``train.spacy``, ``dev.spacy`` and ``test.spacy``."""
        return Path(self.corpus_dir) / self.dataset


def run_one(spec: RunSpec) -> dict:
    """Train the run's pipeline, evaluate it on ``test.spacy`` and write ``output/metrics.json``
    (see the module docstring); returns the metrics."""
    task = task_for(spec.dataset, spec.task, spec.architecture)
    for path in (spec.corpus / "train.spacy", spec.corpus / "dev.spacy", spec.corpus / "test.spacy"):
        if not path.exists():
            raise ElmoFileError(f"{path} not found: run the convert step for {spec.dataset} first")
    config = spec.config or task.config_for(spec.scheme, spec.embed)
    config_path = Path(spec.config_dir) / config
    if not config_path.is_file():
        raise ElmoFileError(f"{config_path}: no such training config")
    settings = _settings(spec, task, config_path)
    identity = _identity(settings, config_path, spec.corpus, spec.scheme, spec.seed)
    environment = run_environment()  # the code as this process starts it
    train_seconds = _train(spec, config_path, settings)
    metrics = {
        **_metrics(spec, task, config, settings, train_seconds),
        "identity": identity,
        "environment": environment,
    }
    output = Path(spec.output)
    if not spec.keep_model:
        shutil.rmtree(output / "training")
    write_text_atomic(output / "metrics.json", json.dumps(metrics, indent=2) + "\n")
    return metrics


def _settings(spec: RunSpec, task: Task, config_path: Path) -> Dict[str, Any]:
    """The ``spacy train`` overrides of a run, in the order its identity records them: the data, the
    seed, the protocol's, the logger, a fixed batch size, the ELMo settings (not for ``baseline``),
    then ``spec.overrides`` (checked against the config at ``config_path`` and the run's own)."""
    corpus = spec.corpus
    settings: Dict[str, Any] = {
        "paths.train": str(corpus / "train.spacy"),
        "paths.dev": str(corpus / "dev.spacy"),
        "system.seed": int(spec.seed),
        **spec.protocol.settings(_count_sentences(corpus / "train.spacy", spec.protocol.gold_preproc)),
        "training.logger": {
            "@loggers": "spacy-elmo-mix.LayerWeightsLogger.v1",
            "path": str(Path(spec.output) / TRAIN_LOG),
        },
    }
    if spec.batch_words:
        size = int(spec.batch_words)
        settings.update({"training.batcher.size.start": size, "training.batcher.size.stop": size})
    if spec.scheme != BASELINE:
        settings.update(
            {
                "paths.elmo_options": spec.elmo_options,
                "paths.elmo_weights": spec.elmo_weights,
                f"components.{task.component}.model.tok2vec.elmo.mixer.name": spec.scheme,
                "initialize.components.elmo.cache_dir": spec.cache_dir,
                "initialize.components.elmo.cache_dtype": spec.cache_dtype,
            }
        )
    overrides = spec.overrides or {}
    _check_overrides(overrides, settings, config_path)
    settings.update(overrides)
    return settings


def _train(spec: RunSpec, config_path: Path, settings: Dict[str, Any]) -> float:
    """Train the config at ``config_path`` with ``settings`` into ``output/training``, with a fresh
    training log; returns the seconds it took."""
    from spacy.cli.train import train

    output = Path(spec.output)
    output.mkdir(parents=True, exist_ok=True)
    (output / TRAIN_LOG).unlink(missing_ok=True)
    started = time.perf_counter()
    train(config_path, output / "training", overrides=settings, use_gpu=spec.gpu_id)
    return time.perf_counter() - started


def _metrics(spec: RunSpec, task: Task, config: str, settings: Dict[str, Any], train_seconds: float) -> dict:
    """``metrics.json`` of a trained run, without its identity and environment: the test score of its
    best pipeline (``output/training/model-best``), its protocol, how training ended, its config (file
    name) and learned layer weights. settings: those it trained with; train_seconds: how long it took."""
    import spacy
    from spacy.training import Corpus

    output = Path(spec.output)
    nlp = spacy.load(output / "training" / "model-best")  # on the GPU train() selected, if any
    scores = nlp.evaluate(Corpus(spec.corpus / "test.spacy", gold_preproc=spec.protocol.gold_preproc)(nlp))
    return {
        "dataset": spec.dataset,
        "scheme": spec.scheme,
        "seed": int(spec.seed),
        "score": float(scores[task.metric]),
        "metric": task.metric,
        "train_seconds": round(train_seconds, 2),
        "protocol": spec.protocol.describe(spec.architecture, spec.embed),
        **how_it_ended(output / TRAIN_LOG, settings),
        "max_steps": int(settings["training.max_steps"]),
        "config": config,
        "layer_weights": _layer_weights(nlp, task.component),
    }


def _check_overrides(overrides: Dict[str, object], settings: Dict[str, object], config_path: Path) -> None:
    """Each override must name a setting of the config that the run does not set itself: spaCy
    accepts a new key in a section it does not validate (``training.foo``) and ignores it, and an
    override of the run's own settings (the seed, the protocol's budget, the scheme) would make the
    run something other than what its options and ``metrics.json`` say."""
    from spacy.util import load_config

    taken = sorted(set(overrides) & set(settings))
    if taken:
        raise ElmoInputError(
            f"override {taken[0]!r}: the run sets it from its own options (seed, protocol, scheme, paths)"
        )
    known = load_config(config_path, interpolate=False)
    for key in overrides:
        node = known
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                raise ElmoInputError(f"override {key!r}: {config_path.name} has no such setting")
            node = node[part]


def _identity(settings: Dict[str, Any], config_path: Path, corpus: Path, scheme: str, seed: int) -> dict:
    """The run's identity: the grid's command, the settings, and the files it reads (corpus, config, biLM)."""
    files = [corpus / f"{split}.spacy" for split in ("train", "dev", "test")] + [config_path]
    if scheme != BASELINE:
        from ..default_model import default_model_files

        bilm = [settings["paths.elmo_options"], settings["paths.elmo_weights"]]
        files += [f for f in bilm if f and Path(str(f)).is_file()] if bilm[0] else list(default_model_files())
    recorded = {key: value for key, value in settings.items() if key != "training.logger"}
    return make_identity(os.environ.get(COMMAND_ENV) or None, {"config": config_path.name, **recorded}, files, seed)


def _count_sentences(path: Path, gold_preproc: bool) -> int:
    """The number of training examples spaCy reads from ``path`` (sentences with ``gold_preproc``)."""
    import spacy
    from spacy.training import Corpus

    return sum(1 for _ in Corpus(path, gold_preproc=gold_preproc)(spacy.blank("xx")))


def _layer_weights(nlp, component: str) -> Dict[str, dict]:
    """The learned weights of the component's scheme (absent for concatenation)."""
    from ..learned_weights import learned_layer_weights

    mixes = learned_layer_weights(nlp).get(component, [])
    return {component: {"weights": mixes[0]["weights"], "gamma": mixes[0]["gamma"]}} if mixes else {}
