"""Run identity: the grid reruns runs whose command or input files changed; compare leaves them out."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
import time
from pathlib import Path

import pytest
import spacy.cli.train
from spacy.tokens import Doc, DocBin
from spacy.vocab import Vocab

from spacy_elmo_mix.__main__ import main as cli
from spacy_elmo_mix.errors import ElmoFileError, ElmoInputError
from spacy_elmo_mix.workflow.compare import compare
from spacy_elmo_mix.workflow.convert import convert_dataset
from spacy_elmo_mix.workflow.grid import run_grid
from spacy_elmo_mix.workflow.identity import (
    COMMAND_ENV,
    PACKAGE_DIR,
    file_sha256,
    local_path,
    make_identity,
    stale_reason,
)
from spacy_elmo_mix.workflow.protocol import Protocol
from spacy_elmo_mix.workflow.run import CONFIG_DIR, RunSpec, _identity, run_one

# A job that records an identity naming one input file (argv[5]) and the command the grid passed.
JOB = (
    "import json, os, sys; from spacy_elmo_mix.workflow.identity import make_identity; "
    "d, s, n, o, f, steps = sys.argv[1:]; "
    f"ident = make_identity(os.environ['{COMMAND_ENV}'], {{'steps': steps}}, [f], int(n)); "
    "json.dump({'dataset': d, 'scheme': s, 'seed': int(n), 'score': 0.5, 'metric': 'ents_f', 'identity': ident}, "
    "open(os.path.join(o, 'metrics.json'), 'w'))"
)


def template(data_file, steps):
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(JOB)} {{dataset}} {{scheme}} {{seed}} {{output}} {data_file} {steps}"


def grid(results, data_file, steps):
    return run_grid(
        ["d"], ["s1", "s2"], [1], template(data_file, steps), results_dir=results, max_workers=1, progress=False
    )


def test_grid_reruns_exactly_the_runs_whose_identity_changed(tmp_path):
    results, data = tmp_path / "results", tmp_path / "train.spacy"
    data.write_bytes(b"corpus v1")
    assert grid(results, data, 10).count("ok") == 2
    recorded = json.loads((results / "runs/d/s1/seed1/metrics.json").read_text())["identity"]
    assert recorded["files"] == {str(data.resolve()): file_sha256(data)} and "{output}" in recorded["command"]
    assert grid(results, data, 10).count("skipped") == 2  # nothing changed
    changed = grid(results, data, 20)  # a setting in the command line changed
    assert changed.count("ok") == 2 and {r.rerun for r in changed.results} == {"its command changed"}
    time.sleep(0.01)
    data.write_bytes(b"corpus v2")  # the corpus changed
    again = grid(results, data, 20)
    assert again.count("ok") == 2 and all("train.spacy changed" in r.rerun for r in again.results)
    assert "2 reran because their earlier result was out of date" in again.format()


def test_a_clone_in_another_folder_keeps_the_committed_runs(tmp_path, monkeypatch):
    """Identities name the project's files relative to it, the package's files relative to the
    package, and the interpreter as ``python``: the same project in another folder (a clone on
    another machine) skips its committed runs and tabulates them; a changed file there still counts."""
    project = tmp_path / "here"
    (project / "corpus").mkdir(parents=True)
    (project / "corpus/train.spacy").write_bytes(b"corpus v1")
    monkeypatch.chdir(project)
    assert grid(Path("results"), "corpus/train.spacy", 10).count("ok") == 2
    recorded = json.loads(Path("results/runs/d/s1/seed1/metrics.json").read_text())["identity"]
    assert recorded["command"].startswith("python -c ") and sys.executable not in recorded["command"]
    assert list(recorded["files"]) == ["corpus/train.spacy"]
    missing = f"corpus/train.spacy not found ({tmp_path / 'corpus/train.spacy'})"
    assert stale_reason(recorded, base=tmp_path) == missing  # read from outside the project
    shutil.copytree(project, tmp_path / "clone")
    monkeypatch.chdir(tmp_path / "clone")
    assert grid(Path("results"), "corpus/train.spacy", 10).count("skipped") == 2
    assert [run.scheme for run in compare("results").results.runs] == ["s1", "s2"]
    time.sleep(0.01)
    Path("corpus/train.spacy").write_bytes(b"corpus v2")
    assert {r.rerun for r in grid(Path("results"), "corpus/train.spacy", 10).results} == {"corpus/train.spacy changed"}


def test_a_clone_before_convert_fails_in_one_line_and_sets_no_result_aside(tmp_path, capsys):
    """Committed runs whose corpus is not here (yet) cannot be checked: the grid says so before it
    moves anything (each rerun would only fail, its committed metrics.json set aside as stale); a
    changed command still reruns them."""
    results, data = tmp_path / "results", tmp_path / "train.spacy"
    data.write_bytes(b"corpus v1")
    assert grid(results, data, 10).count("ok") == 2
    committed = {path: path.read_bytes() for path in results.rglob("metrics.json")}
    data.unlink()
    with pytest.raises(ElmoFileError) as failure:
        grid(results, data, 10)
    assert str(failure.value) == (
        f"cannot check the runs of d ({data} not found): run their convert step (or restore the file) first, or leave them out of --datasets"
    )
    assert {path: path.read_bytes() for path in results.rglob("metrics.json")} == committed
    assert not list(results.rglob("metrics.stale.json"))
    data.write_bytes(b"corpus v1")
    assert {r.rerun for r in grid(results, data, 20).results} == {"its command changed"}


def test_package_files_are_named_relative_to_the_package():
    config = PACKAGE_DIR / "configs/crf_ner.cfg"
    identity = make_identity(None, {}, [config], 1)
    assert identity["files"] == {"<spacy_elmo_mix>/configs/crf_ner.cfg": file_sha256(config)}
    assert stale_reason(identity) is None


def test_a_failed_rerun_leaves_no_stale_metrics(tmp_path):
    results, data = tmp_path / "results", tmp_path / "train.spacy"
    data.write_bytes(b"v1")
    grid(results, data, 10)
    failing = f"{shlex.quote(sys.executable)} -c 'import sys; sys.exit(3)' {{output}}"
    summary = run_grid(["d"], ["s1"], [1], failing, results_dir=results, progress=False)
    assert summary.count("failed") == 1 and not (results / "runs/d/s1/seed1/metrics.json").exists()
    assert json.loads((results / "runs/d/s1/seed1/metrics.stale.json").read_text())["score"] == 0.5  # kept aside


def test_jobs_recording_no_identity_get_their_command(tmp_path):
    job = "import json, os, sys; json.dump({'score': 1}, open(os.path.join(sys.argv[1], 'metrics.json'), 'w'))"
    command = f"{shlex.quote(sys.executable)} -c {shlex.quote(job)} {{output}}"
    run_grid(["d"], ["s"], [1], command, results_dir=tmp_path, progress=False)
    identity = json.loads((tmp_path / "runs/d/s/seed1/metrics.json").read_text())["identity"]
    assert identity["command"].endswith("'{output}'") and stale_reason(identity, identity["command"]) is None
    assert run_grid(["d"], ["s"], [1], command, results_dir=tmp_path, progress=False).count("skipped") == 1


def test_a_file_read_through_a_symlink_is_recorded_by_its_real_path(tmp_path):
    """Data reached through a symlinked folder (as ../shared may be) is named by its real path, so
    the link and the folder give one identity, and a change seen through either makes it stale."""
    real, link = tmp_path / "shared", tmp_path / "shared_link"
    real.mkdir()
    link.symlink_to(real, target_is_directory=True)
    data = real / "train.spacy"
    data.write_bytes(b"v1")
    identity = make_identity(None, {}, [link / "train.spacy"], 1)
    assert identity == make_identity(None, {}, [data], 1)
    assert identity["files"] == {str(data): file_sha256(link / "train.spacy")} and stale_reason(identity) is None
    time.sleep(0.01)
    (link / "train.spacy").write_bytes(b"v2")
    assert stale_reason(identity) == f"{data} changed"


def test_compare_leaves_out_runs_whose_inputs_changed(tmp_path):
    data = tmp_path / "dev.spacy"
    data.write_bytes(b"v1")
    for seed in (1, 2):
        run_dir = tmp_path / "results/runs/conll2003/weighted" / f"seed{seed}"
        run_dir.mkdir(parents=True)
        metrics = {
            "dataset": "conll2003",
            "scheme": "weighted",
            "seed": seed,
            "score": 0.9,
            "metric": "ents_f",
            "identity": make_identity("cmd", {}, [data] if seed == 2 else [], seed),
        }
        (run_dir / "metrics.json").write_text(json.dumps(metrics))
    time.sleep(0.01)
    data.write_bytes(b"v2")
    report = compare(tmp_path / "results")
    assert [r.seed for r in report.results.runs] == [1]
    assert "out of date: " in report.results.missing["conll2003", "weighted", 2]
    assert "dev.spacy changed" in (tmp_path / "results/table.md").read_text()


def test_compare_on_a_missing_results_folder_fails(tmp_path, capsys):
    assert cli(["compare", "--results", str(tmp_path / "nosuch")]) == 1
    assert "nosuch: no such results folder" in capsys.readouterr().err
    assert not (tmp_path / "nosuch").exists()


@pytest.mark.parametrize(
    "args,message",
    [
        (["--scheme", "nosuch"], "unknown scheme 'nosuch'"),
        (["--dataset", "mine"], "dataset 'mine' is not built in"),
        (["--max-steps", "0"], "max_steps must be a positive integer, got 0"),
        (["--seed", "-1"], "seed must be in 0..2**32-1, got -1"),
        (["--seed", "5000000000"], "seed must be in 0..2**32-1, got 5000000000"),
        (["--gpu-id", "-2"], "gpu_id must be -1 (CPU) or a device number, got -2"),
        (["--batch-words", "-5"], "batch_words must be 0 (the config's schedule) or positive, got -5"),
        (["--elmo-options", "options.json"], "give both elmo_options and elmo_weights, or neither"),
        (["--embed", "elmo_hash", "--config", "ner.cfg"], "config ner.cfg names the config itself: leave out embed"),
        (["--seed", "2"], "conll2003/train.spacy not found: run the convert step for conll2003 first"),
    ],
)
def test_run_rejects_bad_settings_before_training(tmp_path, capsys, args, message):
    """RunSpec checks the values, run_one the files: either way one line on stderr and status 1."""
    base = {
        "--dataset": "conll2003",
        "--scheme": "weighted",
        "--seed": "1",
        "--output": str(tmp_path / "out"),
        "--corpus": str(tmp_path),
    }
    base.update(dict(zip(args[::2], args[1::2])))
    argv = ["run"] + [item for pair in base.items() for item in pair]
    assert cli(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and message in err
    assert not (tmp_path / "out").exists()


def test_run_rejects_an_unknown_embed_as_a_usage_error(tmp_path, capsys):
    argv = ["run", "--dataset", "conll2003", "--scheme", "weighted", "--seed", "1", "--output", str(tmp_path)]
    with pytest.raises(SystemExit) as exited:
        cli(argv + ["--embed", "hash"])
    assert exited.value.code == 2 and "invalid choice: 'hash'" in capsys.readouterr().err


def test_embed_elmo_hash_trains_the_hash_config_and_leaves_the_baseline_alone(tiny_model_files, data_dir, tmp_path):
    convert_dataset("conll2003", data_dir / "conll2003", tmp_path / "corpus" / "conll2003", max_sentences=20)
    options, weights = map(str, tiny_model_files)
    configs = {}
    for scheme in ("weighted", "baseline"):
        spec = RunSpec(
            "conll2003",
            scheme,
            1,
            tmp_path / scheme,
            tmp_path / "corpus",
            options,
            weights,
            Protocol(max_steps=2, eval_frequency=1),
            overrides={"components.ner.model.tok2vec.width": 16} if scheme != "baseline" else {},
            embed="elmo_hash",
        )
        metrics = run_one(spec)
        recorded = json.loads((tmp_path / scheme / "metrics.json").read_text())
        assert recorded == metrics and list(recorded) == METRICS_KEYS
        configs[scheme] = (metrics["config"], recorded["identity"]["settings"]["config"])
    assert configs == {"weighted": ("ner_elmo_hash.cfg",) * 2, "baseline": ("ner_baseline.cfg",) * 2}


@pytest.mark.parametrize(
    "override, message",
    [
        ({"training.foo": 1}, "'training.foo': crf_ner.cfg has no such setting"),
        ({"components.crf_ner.model.nope.width": 1}, "crf_ner.cfg has no such setting"),
        ({"system.seed": 7}, "'system.seed': the run sets it"),
        ({"training.max_epochs": 3}, "'training.max_epochs': the run sets it"),
    ],
)
def test_run_rejects_overrides_it_would_ignore_or_contradict(data_dir, tmp_path, override, message):
    """spaCy ignores a new key in [training]; an override of the seed or the protocol's budget would
    make metrics.json describe another run than the one trained."""
    convert_dataset("conll2000", data_dir / "conll2000", tmp_path / "corpus" / "conll2000", max_sentences=20)
    protocol = Protocol(patience_epochs=5)
    spec = RunSpec(
        "conll2000",
        "layer1",
        1,
        tmp_path / "run",
        tmp_path / "corpus",
        protocol=protocol,
        overrides=override,
        architecture="paper",
    )
    with pytest.raises(ElmoInputError, match=message):
        run_one(spec)
    assert not (tmp_path / "run").exists()


# The keys of a run's metrics.json, in their order.
METRICS_KEYS = [
    "dataset",
    "scheme",
    "seed",
    "score",
    "metric",
    "train_seconds",
    "protocol",
    "epochs",
    "best_epoch",
    "best_step",
    "stop_reason",
    "converged",
    "max_steps",
    "config",
    "layer_weights",
    "identity",
    "environment",
]
COMMAND = "python -m spacy_elmo_mix run --dataset ud_ewt --scheme weighted --seed 1 --output '{output}'"
LOGGER = {"@loggers": "spacy-elmo-mix.LayerWeightsLogger.v1", "path": "out/train_log.jsonl"}
# Three runs (RunSpec options, dataset, scheme) with the config they train and the settings they
# train with, as the committed results recorded them: whether those results count as current
# depends on the keys, values, value types and order of the settings. 70 training sentences: 3
# updates an epoch of 32 sentences.
PINNED = [
    (
        dict(protocol=Protocol(patience_epochs=5), architecture="paper", cache_dir="cache"),
        "ud_ewt",
        "weighted",
        "crf_tagger.cfg",
        {
            "paths.train": "corpus/ud_ewt/train.spacy",
            "paths.dev": "corpus/ud_ewt/dev.spacy",
            "system.seed": 1,
            "corpora.train.gold_preproc": True,
            "corpora.dev.gold_preproc": True,
            "training.batcher": {"@batchers": "spacy.batch_by_sequence.v1", "size": 32, "get_length": None},
            "training.max_steps": 0,
            "training.max_epochs": 150,
            "training.eval_frequency": 3,
            "training.patience": 15,
            "training.logger": LOGGER,
            "paths.elmo_options": None,
            "paths.elmo_weights": None,
            "components.crf_tagger.model.tok2vec.elmo.mixer.name": "weighted",
            "initialize.components.elmo.cache_dir": "cache",
            "initialize.components.elmo.cache_dtype": "float16",
            "training.optimizer.learn_rate": 0.002,
        },
        ["<spacy_elmo_mix>/default_model/options.json", "<spacy_elmo_mix>/default_model/weights.hdf5"],
    ),
    (
        dict(protocol=Protocol(max_steps=300, eval_frequency=100, tokens="retokenized"), batch_words=500),
        "conll2003",
        "baseline",
        "ner_baseline.cfg",
        {
            "paths.train": "corpus/conll2003/train.spacy",
            "paths.dev": "corpus/conll2003/dev.spacy",
            "system.seed": 1,
            "corpora.train.gold_preproc": False,
            "corpora.dev.gold_preproc": False,
            "training.max_steps": 300,
            "training.eval_frequency": 100,
            "training.logger": LOGGER,
            "training.batcher.size.start": 500,
            "training.batcher.size.stop": 500,
            "training.optimizer.learn_rate": 0.002,
        },
        [],
    ),
    (
        dict(elmo_options="bilm/options.json", elmo_weights="bilm/weights.hdf5", embed="elmo_hash"),
        "conll2003",
        "layer2",
        "ner_elmo_hash.cfg",
        {
            "paths.train": "corpus/conll2003/train.spacy",
            "paths.dev": "corpus/conll2003/dev.spacy",
            "system.seed": 1,
            "corpora.train.gold_preproc": True,
            "corpora.dev.gold_preproc": True,
            "training.max_steps": 1000,
            "training.eval_frequency": 200,
            "training.logger": LOGGER,
            "paths.elmo_options": "bilm/options.json",
            "paths.elmo_weights": "bilm/weights.hdf5",
            "components.ner.model.tok2vec.elmo.mixer.name": "layer2",
            "initialize.components.elmo.cache_dir": None,
            "initialize.components.elmo.cache_dtype": "float16",
            "training.optimizer.learn_rate": 0.002,
        },
        ["bilm/options.json", "bilm/weights.hdf5"],
    ),
]


class _Trained(Exception):
    """Raised by the stand-in for spaCy's train(): the test needs what it was given, not a model."""


@pytest.mark.parametrize("options, dataset, scheme, config, settings, bilm", PINNED)
def test_run_settings_and_identity_are_pinned(tmp_path, monkeypatch, options, dataset, scheme, config, settings, bilm):
    """run_one hands spaCy's train() exactly these settings, and records exactly this identity of
    them in metrics.json (the committed runs are matched against identities like it)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(COMMAND_ENV, COMMAND)
    Path("corpus", dataset).mkdir(parents=True)
    docs = [Doc(Vocab(), words=["A", "b", "."], sent_starts=[True, False, False]) for _ in range(70)]
    for split in ("train", "dev", "test"):
        DocBin(docs=docs).to_disk(Path("corpus", dataset, f"{split}.spacy"))
    Path("bilm").mkdir()
    for name in ("options.json", "weights.hdf5"):
        Path("bilm", name).write_bytes(name.encode())
    given = []

    def train(config_path, output, overrides, use_gpu):
        given.append((config_path, output, overrides, use_gpu))
        raise _Trained

    monkeypatch.setattr(spacy.cli.train, "train", train)
    spec = RunSpec(dataset, scheme, 1, "out", "corpus", overrides={"training.optimizer.learn_rate": 0.002}, **options)
    with pytest.raises(_Trained):
        run_one(spec)
    [(config_path, output, trained_with, use_gpu)] = given
    assert (config_path, output, use_gpu) == (CONFIG_DIR / config, Path("out/training"), -1)
    assert json.dumps(trained_with) == json.dumps(settings)  # keys, values, types and order
    files = [f"corpus/{dataset}/{split}.spacy" for split in ("train", "dev", "test")]
    files += [f"<spacy_elmo_mix>/configs/{config}", *bilm]
    expected = {
        "command": COMMAND,
        "settings": {"config": config, **{key: value for key, value in settings.items() if key != "training.logger"}},
        "files": {name: file_sha256(local_path(name)) for name in files},
        "seed": 1,
    }
    identity = _identity(trained_with, config_path, spec.corpus, scheme, 1)
    assert json.dumps(identity) == json.dumps(expected) and None not in identity["files"].values()


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(seed=2**32), "seed must be in 0..2**32-1, got 4294967296"),
        (dict(gpu_id=-2), "gpu_id must be -1 (CPU) or a device number, got -2"),
        (dict(batch_words=-1), "batch_words must be 0 (the config's schedule) or positive, got -1"),
        (dict(batch_words=500, protocol=Protocol(patience_epochs=5)), "the converge protocol batches sentences"),
        (dict(elmo_weights="weights.hdf5"), "give both elmo_options and elmo_weights, or neither"),
        (
            dict(config="ner.cfg", embed="elmo_hash"),
            "config ner.cfg names the config itself: leave out embed elmo_hash",
        ),
        (dict(scheme="layer4"), "unknown scheme 'layer4'"),
        (dict(embed="hash"), "unknown embed 'hash'"),
        (dict(architecture="cnn"), "unknown architecture 'cnn'"),
        (dict(dataset="mine"), "dataset 'mine' is not built in"),
        (dict(dataset="mine", task="parser"), "the 'spacy' architecture has no task 'parser'"),
        (
            dict(dataset="sst5"),
            "sst5: the 'spacy' architecture has no task 'textcat'; choose one of ner, tagger "
            "(task 'textcat' has the 'paper' architecture only: --architecture paper)",
        ),
    ],
)
def test_run_spec_rejects_bad_values_when_created(options, message):
    spec = dict(dataset="conll2003", scheme="weighted", seed=1, output="out", corpus_dir="corpus")
    with pytest.raises(ElmoInputError, match=re.escape(message)):
        RunSpec(**{**spec, **options})


def test_run_command_offers_every_task():
    from spacy_elmo_mix.cli.run import _parser
    from spacy_elmo_mix.workflow.run import TASK_NAMES

    task = next(action for action in _parser()._actions if action.dest == "task")
    assert tuple(task.choices) == TASK_NAMES


@pytest.mark.parametrize(
    "dataset, component, metric", [("sst5", "textcat", "cats_acc"), ("ud_ewt_parse", "parser", "dep_las")]
)
def test_new_tasks_run_in_the_paper_architecture(dataset, component, metric):
    from spacy_elmo_mix.workflow.run import task_for

    task = task_for(dataset, architecture="paper")
    assert (task.component, task.metric, task.config_for("weighted", "elmo")) == (component, metric, f"{component}.cfg")
    assert task.config_for("baseline", "elmo") == f"{component}_baseline.cfg"
