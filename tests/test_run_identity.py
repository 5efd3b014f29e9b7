"""Run identity: the grid reruns runs whose command or input files changed; compare leaves them out."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import time
from pathlib import Path

import pytest

from spacy_elmo_mix.__main__ import main as cli
from spacy_elmo_mix.workflow.compare import compare
from spacy_elmo_mix.workflow.grid import run_grid
from spacy_elmo_mix.workflow.identity import COMMAND_ENV, PACKAGE_DIR, file_sha256, make_identity, stale_reason
from spacy_elmo_mix.workflow.protocol import Protocol

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
        (["--max-steps", "0"], "--max-steps must be a positive integer"),
        (["--seed", "-1"], "--seed must be in 0..2**32-1, got -1"),
        (["--gpu-id", "-2"], "--gpu-id must be -1 (CPU) or a device number, got -2"),
        (["--seed", "2"], "conll2003/train.spacy not found: run the convert step for conll2003 first"),
    ],
)
def test_run_rejects_bad_settings_before_training(tmp_path, capsys, args, message):
    base = {
        "--dataset": "conll2003",
        "--scheme": "weighted",
        "--seed": "1",
        "--output": str(tmp_path / "out"),
        "--corpus": str(tmp_path),
    }
    base.update(dict(zip(args[::2], args[1::2])))
    argv = ["run"] + [item for pair in base.items() for item in pair]
    with pytest.raises(SystemExit) if args[0] in ("--max-steps", "--gpu-id") or args[1] == "-1" else _no_raise():
        assert cli(argv) == 1
    assert message in capsys.readouterr().err


class _no_raise:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize(
    "args,message",
    [
        (["--embed", "hash"], "invalid choice: 'hash'"),
        (
            ["--embed", "elmo_hash", "--config", "ner.cfg"],
            "--config ner.cfg names the config itself: leave out --embed elmo_hash",
        ),
    ],
)
def test_run_rejects_bad_embed_settings(tmp_path, capsys, args, message):
    argv = ["run", "--dataset", "conll2003", "--scheme", "weighted", "--seed", "1", "--output", str(tmp_path), *args]
    with pytest.raises(SystemExit):
        cli(argv)
    assert message in capsys.readouterr().err


def test_embed_elmo_hash_trains_the_hash_config_and_leaves_the_baseline_alone(tiny_model_files, data_dir, tmp_path):
    from spacy_elmo_mix.workflow.convert import convert_dataset
    from spacy_elmo_mix.workflow.run import run_one

    convert_dataset("conll2003", data_dir / "conll2003", tmp_path / "corpus" / "conll2003", max_sentences=20)
    options, weights = map(str, tiny_model_files)
    configs = {}
    for scheme in ("weighted", "baseline"):
        metrics = run_one(
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
        recorded = json.loads((tmp_path / scheme / "metrics.json").read_text())["identity"]["settings"]["config"]
        configs[scheme] = (metrics["config"], recorded)
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
    from spacy_elmo_mix.errors import ElmoInputError
    from spacy_elmo_mix.workflow.convert import convert_dataset
    from spacy_elmo_mix.workflow.run import run_one

    convert_dataset("conll2000", data_dir / "conll2000", tmp_path / "corpus" / "conll2000", max_sentences=20)
    protocol = Protocol(patience_epochs=5)
    with pytest.raises(ElmoInputError, match=message):
        run_one(
            "conll2000",
            "layer1",
            1,
            tmp_path / "run",
            tmp_path / "corpus",
            protocol=protocol,
            overrides=override,
            architecture="paper",
        )
    assert not (tmp_path / "run").exists()
