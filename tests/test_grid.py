"""grid: tiny jobs on the local backend (run, resume, failures) and on a local Ray instance."""

from __future__ import annotations

import json
import os
import shlex
import sys
import threading
import time

import pytest

from spacy_elmo_mix.cli.grid import main as grid_cli
from spacy_elmo_mix.workflow import grid
from spacy_elmo_mix.workflow.grid import CommandTemplate, Job, run_grid, running_status, write_returned_files

# A job that writes metrics.json (score from the seed, its OMP_NUM_THREADS recorded) and fails with
# exit code 3 for scheme "bad".
JOB = (
    "import json, os, sys; d, s, n, o = sys.argv[1:]; print('job', d, s, n); "
    "s == 'bad' and sys.exit(3); "
    "json.dump({'dataset': d, 'scheme': s, 'seed': int(n), 'score': int(n) / 10, 'metric': 'ents_f', "
    "'threads': os.environ['OMP_NUM_THREADS']}, open(os.path.join(o, 'metrics.json'), 'w'))"
)
TEMPLATE = f"{shlex.quote(sys.executable)} -c {shlex.quote(JOB)} {{dataset}} {{scheme}} {{seed}} {{output}}"


def metrics(results, dataset, scheme, seed):
    return json.loads((results / "runs" / dataset / scheme / f"seed{seed}" / "metrics.json").read_text())


def test_local_runs_resumes_and_reports_failures(tmp_path):
    results = tmp_path / "results"
    summary = run_grid(
        ["d1", "d2"], ["good", "bad"], [1, 2], TEMPLATE, results_dir=results, max_workers=2, progress=False
    )
    assert (summary.count("ok"), summary.count("failed"), summary.count("skipped")) == (4, 4, 0)
    recorded = metrics(results, "d2", "good", 2)
    assert recorded.pop("identity")["seed"] == 2  # the grid stamps the command of a job that records none
    assert recorded == {"dataset": "d2", "scheme": "good", "seed": 2, "score": 0.2, "metric": "ents_f", "threads": "1"}
    failed = summary.failed[0]
    assert failed.job.scheme == "bad" and failed.returncode == 3 and failed.message == "exit code 3"
    assert any("job d1 bad 1" in line for line in failed.log_tail) and failed.log_tail[-1].startswith("[exit code 3")
    assert "FAILED d1/bad/seed1: exit code 3" in summary.format()
    assert (results / "runs/d1/bad/seed1/log.txt").exists()

    again = run_grid(["d1", "d2"], ["good", "bad"], [1, 2], TEMPLATE, results_dir=results, progress=False)
    assert (again.count("skipped"), again.count("failed")) == (4, 4)
    assert [r.job for r in again.results if r.status == "skipped"] == [
        r.job for r in summary.results if r.status == "ok"
    ]


def test_jobs_without_metrics_or_that_cannot_start_fail(tmp_path):
    quiet = f"{shlex.quote(sys.executable)} -c pass {{output}}"
    summary = run_grid(["d"], ["s"], [1], quiet, results_dir=tmp_path, progress=False)
    assert summary.failed[0].message == "exit code 0 but no metrics.json was written"
    summary = run_grid(["d"], ["s"], [1], "/nonexistent/program {output}", results_dir=tmp_path, progress=False)
    assert summary.failed[0].returncode == 127
    assert "cannot start the command" in (tmp_path / "runs/d/s/seed1/log.txt").read_text()


def test_template_fills_placeholders_only():
    make = CommandTemplate("""python -c "print({'a': 1})" {dataset} --seed {seed} --out={output}/x {scheme}""")
    assert make("conll2003", "weighted", 3, "/r") == [
        sys.executable,
        "-c",
        "print({'a': 1})",
        "conll2003",
        "--seed",
        "3",
        "--out=/r/x",
        "weighted",
    ]
    assert CommandTemplate("echo {seed}")("d", "s", 1, "/r") == ["echo", "1"]


def test_returned_files_stay_in_the_run_folder(tmp_path):
    write_returned_files(tmp_path, b"log", {"metrics.json": b"{}", "sub/a.txt": b"a"})
    assert (tmp_path / "sub/a.txt").read_bytes() == b"a" and (tmp_path / "log.txt").read_bytes() == b"log"
    with pytest.raises(ValueError, match="outside its folder"):
        write_returned_files(tmp_path / "run", b"", {"../escape.txt": b"x"})


def test_cli_exit_code_and_ray_missing(tmp_path, capsys, monkeypatch):
    args = ["--datasets", "d", "--schemes", "good", "--seeds", "1", "--results", str(tmp_path), "--no-progress"]
    assert grid_cli(args + ["--command-template", TEMPLATE]) == 0
    assert "1 jobs: 1 ok" in capsys.readouterr().out
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    assert grid_cli(args + ["--seeds", "2", "--command-template", TEMPLATE, "--backend", "ray"]) == 1
    assert "needs Ray, which is not installed" in capsys.readouterr().err


def test_ray_backend_on_a_local_instance(tmp_path):
    pytest.importorskip("ray", reason="ray is not installed (optional extra: pip install 'spacy-elmo-mix[ray]')")
    results = tmp_path / "results"
    summary = run_grid(
        ["d1"], ["good", "bad"], [1, 2], TEMPLATE, backend="ray", results_dir=results, max_workers=2, progress=False
    )
    assert (summary.count("ok"), summary.count("failed")) == (2, 2)
    assert metrics(results, "d1", "good", 2)["score"] == 0.2 and metrics(results, "d1", "good", 2)["threads"] == "1"
    assert "job d1 good 1" in (results / "runs/d1/good/seed1/log.txt").read_text()
    assert summary.failed[0].returncode == 3 and any("job d1 bad" in line for line in summary.failed[0].log_tail)


def test_unreachable_ray_address_fails_within_the_timeout(tmp_path, monkeypatch, capsys):
    import threading
    import types

    never = threading.Event()
    fake = types.SimpleNamespace(
        is_initialized=lambda: False, init=lambda **kw: never.wait()
    )  # hangs like a bad address
    monkeypatch.setitem(sys.modules, "ray", fake)
    args = [
        "--datasets",
        "d",
        "--schemes",
        "good",
        "--seeds",
        "1",
        "--results",
        str(tmp_path),
        "--no-progress",
        "--command-template",
        TEMPLATE,
        "--backend",
        "ray",
        "--address",
        "10.255.255.1:6379",
        "--connect-timeout",
        "0.5",
    ]
    assert grid_cli(args) == 1
    assert "could not connect to the Ray cluster at 10.255.255.1:6379 within 0.5 s" in capsys.readouterr().err
    never.set()


def test_unknown_scheme_of_the_run_command_fails_before_any_job(tmp_path, capsys):
    args = [
        "--datasets",
        "conll2003",
        "--schemes",
        "weighted",
        "nosuch",
        "--seeds",
        "1",
        "--results",
        str(tmp_path),
        "--command-template",
        "python -m spacy_elmo_mix run --scheme {scheme} --output {output}",
    ]
    with pytest.raises(SystemExit):
        grid_cli(args)
    assert "unknown scheme(s) nosuch" in capsys.readouterr().err and not (tmp_path / "runs").exists()


def test_negative_seeds_are_rejected(tmp_path, capsys):
    args = [
        "--datasets",
        "d",
        "--schemes",
        "good",
        "--seeds",
        "1",
        "-3",
        "--results",
        str(tmp_path),
        "--command-template",
        TEMPLATE,
    ]
    with pytest.raises(SystemExit):
        grid_cli(args)
    assert "--seeds must be in 0..2**32-1, got -3" in capsys.readouterr().err and not (tmp_path / "runs").exists()


def test_misspelt_placeholder_is_rejected_before_any_job(tmp_path):
    from spacy_elmo_mix.errors import ElmoInputError
    from spacy_elmo_mix.workflow.grid import CommandTemplate

    with pytest.raises(ElmoInputError, match=r"\{outptu\}"):
        CommandTemplate("true {outptu}")
    assert CommandTemplate("python -c 'print({\"a\": 1})' {output}")("d", "s", 1, "o")[-1] == "o"


def test_failed_jobs_are_named_on_stderr(tmp_path, capsys):
    from spacy_elmo_mix.__main__ import main

    code = main(
        [
            "grid",
            "--datasets",
            "conll2003",
            "--schemes",
            "layer9",
            "--seeds",
            "1",
            "--no-progress",
            "--results",
            str(tmp_path / "results"),
            "--command-template",
            "true {output}",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "conll2003" in err and "layer9" in err


RUN_TEMPLATE = "python -m spacy_elmo_mix run --dataset {dataset} --scheme {scheme} --seed {seed} --output {output}"


def finished_run(results, job, seconds, environment=None, command=RUN_TEMPLATE):
    """A finished run's metrics.json, recorded with the command ``command`` gives the job."""
    from spacy_elmo_mix.workflow.grid import CommandTemplate, identity_command

    job.run_dir(results).mkdir(parents=True)
    identity = {"command": identity_command(job, CommandTemplate(command)), "files": {}, "seed": job.seed}
    record = {"train_seconds": seconds, "environment": environment, "identity": identity}
    (job.run_dir(results) / "metrics.json").write_text(json.dumps(record))


def test_projected_cost_from_each_cells_finished_runs(tmp_path):
    """Each job is projected from its own cell's finished runs at any seed (a grid extended to new
    seeds knows its cost), a scheme with none from its data set's mean; runs of another protocol
    (another command) and data sets with no finished run are left out and said so."""
    from spacy_elmo_mix.workflow.grid import CommandTemplate, Job, projected_cost

    for seed, scheme, seconds in ((1, "weighted", 100.0), (2, "weighted", 200.0), (1, "baseline", 30.0)):
        finished_run(tmp_path, Job("wnut16", scheme, seed), seconds)
    finished_run(tmp_path, Job("wnut16", "layer1", 1), 9000.0, command=RUN_TEMPLATE + " --max-steps 10")
    for name in ("seed²", "seedx", "seed"):  # not run folders (int("²") raised before): left out
        (tmp_path / "runs" / "wnut16" / "weighted" / name).mkdir()
        (tmp_path / "runs" / "wnut16" / "weighted" / name / "metrics.json").write_text(
            json.dumps({"train_seconds": 9000.0, "identity": {"command": "", "files": {}}})
        )
    todo = [Job("wnut16", s, n) for s in ("weighted", "baseline", "layer1") for n in (3, 4)]
    todo.append(Job("conll2003", "layer1", 1))
    text = projected_cost(todo, 3, tmp_path, CommandTemplate(RUN_TEMPLATE), workers=2)
    # 2 x 150 s + 2 x 30 s + 2 x the mean of all three (110 s) = 580 s over 6 runs, 2 workers
    assert text.splitlines()[0] == "7 runs to do, 3 up to date, 2 workers"
    assert "wnut16: 6 runs x 1.6 min on average (each scheme's mean training time over 3 finished runs" in text
    assert "on other CPUs; layer1 with none: the data set's mean)" in text
    assert "conll2003: 1 runs; no finished run to project from" in text
    assert "projected: 0.1 h of wall time plus the runs of conll2003 (unknown until one finishes" in text
    alone = projected_cost([Job("conll2003", "layer1", 1)], 0, tmp_path, CommandTemplate(RUN_TEMPLATE), workers=2)
    assert alone.splitlines()[-1].startswith("projected: the runs of conll2003 (unknown") and "0.0 h" not in alone


def test_projected_cost_prefers_runs_on_this_cpu(tmp_path):
    """Runs recorded on this machine's CPU set the projection; those of other CPUs (or none recorded)
    are used only when no run of the data set ran here."""
    from spacy_elmo_mix.workflow.environment import cpu_environment
    from spacy_elmo_mix.workflow.grid import CommandTemplate, Job, projected_cost

    other = {"cpu": "AuthenticAMD AMD EPYC", "cpu_flags": ["avx2"]}
    if cpu_environment() == other:
        other = {"cpu": "GenuineIntel Intel(R) Xeon(R) Processor", "cpu_flags": ["avx2", "avx512f"]}
    for seed, seconds, environment in ((1, 600.0, cpu_environment()), (2, 3000.0, other), (3, 3000.0, None)):
        finished_run(tmp_path, Job("conll2003", "layer1", seed), seconds, environment)
    todo = [Job("conll2003", "layer2", n) for n in range(1, 5)]
    text = projected_cost(todo, 0, tmp_path, CommandTemplate(RUN_TEMPLATE), workers=2)
    assert "conll2003: 4 runs x 10.0 min on average (each scheme's mean training time over 1 finished" in text
    assert "on this CPU; layer2 with none" in text and "projected: 0.3 h of wall time" in text  # 4 x 600 s / 2
    (Job("conll2003", "layer1", 1).run_dir(tmp_path) / "metrics.json").unlink()
    elsewhere = projected_cost(todo, 0, tmp_path, CommandTemplate(RUN_TEMPLATE), workers=2)
    assert "4 runs x 50.0 min on average (each scheme's mean training time over 2 finished" in elsewhere


def test_running_jobs_are_shown_with_their_epoch(tmp_path):
    """The status beside the bar names the jobs running now (log written since the grid started),
    with the epoch and best score of their train_log.jsonl; finished-before and unstarted jobs not."""
    results = tmp_path / "results"
    running, old, unstarted, no_log = Job("d", "a", 1), Job("d", "b", 1), Job("d", "c", 1), Job("d", "e", 1)
    for job in (running, old, no_log):
        job.run_dir(results).mkdir(parents=True)
        (job.run_dir(results) / "log.txt").write_text("$ cmd\n")
    lines = [{"epoch": 1, "score": 0.5}, {"epoch": 2, "score": 0.75}, {"epoch": 3, "score": 0.625}]
    text = "".join(json.dumps(r) + "\n" for r in lines) + '{"epoch": 4, "sc'  # a line being written
    (running.run_dir(results) / "train_log.jsonl").write_text(text)
    (no_log.run_dir(results) / "train_log.jsonl").write_text("{not json\n")
    since = time.time() - 5
    os.utime(old.run_dir(results) / "log.txt", (since - 60, since - 60))
    seen = {}
    status = running_status([running, old, unstarted, no_log], results, since, seen)
    assert status == "running: d/a/seed1 0 min, epoch 3 (best 0.75), d/e/seed1 0 min"
    assert set(seen) == {running, no_log}
    assert running_status([old, unstarted], results, since, {}) == "running: none yet"


def test_grid_bar_shows_a_running_job(tmp_path, capsys, monkeypatch):
    """End to end: a job that logs an epoch and then works for a while appears beside the bar."""
    monkeypatch.setattr(grid, "STATUS_SECONDS", 0.05)
    job = (
        "import json, os, sys, time; o = sys.argv[1]; "
        "open(os.path.join(o, 'train_log.jsonl'), 'w').write(json.dumps({'epoch': 7, 'score': 0.5}) + '\\n'); "
        "time.sleep(1.5); json.dump({'score': 0.5}, open(os.path.join(o, 'metrics.json'), 'w'))"
    )
    template = f"{shlex.quote(sys.executable)} -c {shlex.quote(job)} {{output}}"
    summary = run_grid(["d1"], ["good"], [1], template, results_dir=tmp_path / "results", max_workers=1)
    assert summary.count("ok") == 1
    assert "running: d1/good/seed1 0 min, epoch 7 (best 0.5)" in capsys.readouterr().err


def test_status_thread_ends_when_the_backend_fails(tmp_path, monkeypatch):
    def broken_backend(*args, **kwargs):
        raise RuntimeError("backend down")
        yield  # a generator, as the backends are

    monkeypatch.setitem(grid.BACKENDS, "local", broken_backend)
    before = threading.active_count()
    with pytest.raises(RuntimeError, match="backend down"):
        run_grid(["d1"], ["good"], [1], TEMPLATE, results_dir=tmp_path / "results")
    assert threading.active_count() == before


def test_a_value_given_twice_runs_once(tmp_path):
    summary = run_grid(
        ["d", "d"], ["good", "good"], [1, 1], TEMPLATE, results_dir=tmp_path, max_workers=2, progress=False
    )
    assert [(r.job, r.status) for r in summary.results] == [(Job("d", "good", 1), "ok")]


@pytest.mark.parametrize("datasets,schemes", [([""], ["good"]), (["d"], [".."]), (["../elsewhere"], ["good"])])
def test_ids_that_cannot_name_a_run_folder_fail_before_any_job(tmp_path, capsys, datasets, schemes):
    args = ["--datasets", *datasets, "--schemes", *schemes, "--seeds", "1", "--results", str(tmp_path)]
    assert grid_cli([*args, "--command-template", TEMPLATE, "--no-progress"]) == 1
    assert "cannot name a run folder: give a plain name" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists() and not (tmp_path.parent / "elsewhere").exists()
