"""Run the grid of datasets x schemes x seeds: one shell command per run, locally or on Ray.

A job is the command that ``make_command(dataset, scheme, seed, output)`` returns (a list of
arguments); it must write its evaluation to ``{output}/metrics.json`` (keys: see
``spacy_elmo_mix.workflow.compare``). Each job ends up in the result layout::

    {results_dir}/runs/{dataset}/{scheme}/seed{N}/
        log.txt          the command line, its stdout and stderr, its exit code and duration
        metrics.json     written by the job, with the run's ``identity`` (``workflow.identity``)

A job is done when its ``metrics.json`` exists and its identity is current: the command the grid
would run now (``{output}`` left as a placeholder) equals the recorded one and every file the run
recorded (corpus, config, biLM) is unchanged. Otherwise the old ``metrics.json`` is renamed
``metrics.stale.json`` (so a failed rerun leaves no result that looks current) and the job reruns;
but when a recorded file is not found under an unchanged command (a clone before ``convert``), the
grid raises ElmoFileError before it renames anything. The job learns its command from the
``SPACY_ELMO_MIX_RUN_COMMAND`` environment variable (``python -m spacy_elmo_mix run`` records it);
a job that records no identity gets the command alone.

Backends:

* ``local`` (default): a pool of ``max_workers`` slots (default: the cores this process may use,
  ``os.sched_getaffinity``), each running one job as a subprocess with ``{output}`` = the run folder.
* ``ray``: each job a Ray task (1 CPU) on the cluster of ``ray.init(address=...)`` (None: a new local
  instance with ``max_workers`` CPUs); connecting that takes longer than ``connect_timeout`` seconds
  fails with an error naming the address. The task runs the command on its node with ``{output}`` = a
  temporary folder; the log and every file left in that folder come back to the driver and are
  written into the run folder (``metrics.json`` last). Keep ``{output}`` for small files. Ray is an
  optional extra (``pip install spacy-elmo-mix[ray]``), imported only here.

Every job runs single-threaded (``OMP_NUM_THREADS=1``, which also sets torch's thread count,
``MKL_NUM_THREADS=1``, ``OPENBLAS_NUM_THREADS=1``). A failing job (non-zero exit, or no
metrics.json) is reported with its exit code and last log lines; the other jobs go on.

Progress: a bar over the jobs, and beside it, every :data:`STATUS_SECONDS`, the jobs running here
(local backend) with their minutes so far and, for runs that log one JSON line per evaluation to
``{output}/train_log.jsonl`` (``python -m spacy_elmo_mix run`` does), their epoch and best score.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union, cast

from ..atomic import atomic_write, write_text_atomic
from ..errors import ElmoFileError, ElmoInputError
from .environment import cpu_environment
from .identity import COMMAND_ENV, absent_inputs, absent_inputs_message, stale_reason
from .protocol import TRAIN_LOG

PathLike = Union[str, Path]
MakeCommand = Callable[[str, str, int, str], Sequence[str]]
SINGLE_THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
PLACEHOLDERS = ("dataset", "scheme", "seed", "output")
TAIL_LINES = 15
STALE_METRICS = "metrics.stale.json"
STATUS_SECONDS = 30.0
SEED_DIR = re.compile(r"^seed(\d+)$")  # a run folder's name (Job.run_dir)


@dataclass(frozen=True)
class Job:
    """One run of the grid: dataset, weighting scheme and random seed."""

    dataset: str
    scheme: str
    seed: int

    def run_dir(self, results_dir: PathLike) -> Path:
        """``{results_dir}/runs/{dataset}/{scheme}/seed{N}``."""
        return Path(results_dir) / "runs" / self.dataset / self.scheme / f"seed{self.seed}"

    def __str__(self) -> str:
        return f"{self.dataset}/{self.scheme}/seed{self.seed}"


def run_folders(results_dir: PathLike) -> Iterator[Tuple[Job, Path]]:
    """Every run folder under ``results_dir`` (the layout of :meth:`Job.run_dir`) as (job, folder),
    sorted; entries whose name is not ``seed`` and a number are not runs and are left out."""
    for run_dir in sorted((Path(results_dir) / "runs").glob("*/*/seed*")):
        match = SEED_DIR.match(run_dir.name)
        if match and run_dir.is_dir():
            yield Job(run_dir.parent.parent.name, run_dir.parent.name, int(match.group(1))), run_dir


@dataclass
class JobResult:
    """How one job went.

    job: the job; status: ``ok``, ``failed`` or ``skipped`` (an up-to-date metrics.json existed);
    returncode: the command's exit code (None: skipped, or it never ran); seconds: wall time; message:
    why it failed; log_tail: the last lines of its log; rerun: why an earlier result was out of date.
    """

    job: Job
    status: str
    returncode: Optional[int] = None
    seconds: float = 0.0
    message: str = ""
    log_tail: List[str] = field(default_factory=list)
    rerun: str = ""


@dataclass
class GridSummary:
    """The outcome of :func:`run_grid`: one :class:`JobResult` per job, in grid order."""

    results: List[JobResult]
    results_dir: Path

    def count(self, status: str) -> int:
        """How many jobs have ``status`` (``ok``, ``failed`` or ``skipped``)."""
        return sum(r.status == status for r in self.results)

    @property
    def failed(self) -> List[JobResult]:
        """The results of the jobs that failed."""
        return [r for r in self.results if r.status == "failed"]

    def format(self) -> str:
        """A report for people: the counts, then each failed job with its log's last lines."""
        reruns = sum(bool(r.rerun) for r in self.results)
        lines = [
            f"{len(self.results)} jobs: {self.count('ok')} ok, {self.count('skipped')} skipped (done before, up to date), "
            f"{self.count('failed')} failed; {reruns} reran because their earlier result was out of date"
        ]
        for result in self.failed:
            log = result.job.run_dir(self.results_dir) / "log.txt"
            lines.append(f"FAILED {result.job}: {result.message} (log: {log})")
            lines += [f"    | {line}" for line in result.log_tail]
        return "\n".join(lines)


class CommandTemplate:
    """A picklable ``make_command`` from a template string such as
    ``"python -m spacy train configs/{scheme}.cfg --output {output} --seed {seed}"``.

    The template is split like a shell line (``shlex``); in each argument the placeholders
    ``{dataset}``, ``{scheme}``, ``{seed}`` and ``{output}`` are replaced; any other ``{name}`` is an
    error (a misspelt placeholder). Other braces are left as they are, so a ``python -c`` argument may
    hold JSON or dict literals. A leading ``python`` or
    ``python3`` runs the current interpreter (as ``spacy project run`` does), so jobs see the same
    environment as the runner.
    """

    def __init__(self, template: str):
        """template: the command line with placeholders."""
        self.template = template
        self.args = shlex.split(template)
        if not self.args:
            raise ElmoInputError("empty command template")
        unknown = sorted(set(re.findall(r"\{([A-Za-z_]+)\}", template)) - set(PLACEHOLDERS))
        if unknown:
            raise ElmoInputError(
                f"unknown placeholder(s) {', '.join('{' + u + '}' for u in unknown)} in the command template; "
                f"it may use {', '.join('{' + p + '}' for p in PLACEHOLDERS)}"
            )
        if self.args[0] in ("python", "python3"):
            self.args[0] = sys.executable

    def __call__(self, dataset: str, scheme: str, seed: int, output: str) -> List[str]:
        values = dict(zip(PLACEHOLDERS, (dataset, scheme, str(seed), output)))
        return [self._fill(arg, values) for arg in self.args]

    @staticmethod
    def _fill(arg: str, values: Dict[str, str]) -> str:
        for name, value in values.items():
            arg = arg.replace("{" + name + "}", value)
        return arg


# ------------------------------------------------------------------------------------ running jobs


def run_command(command: Sequence[str], log_path: Path, cwd: Optional[PathLike] = None, identity: str = "") -> int:
    """Run ``command`` single-threaded with stdout and stderr into ``log_path``; return its exit code.

    command: the arguments; log_path: the log to (over)write; cwd: the working folder (None: ours);
    identity: the command as recorded in the run's identity (passed as ``SPACY_ELMO_MIX_RUN_COMMAND``).
    A command that cannot start (not found, not executable) logs why and returns 127.
    """
    env = {**os.environ, **SINGLE_THREAD_ENV, COMMAND_ENV: identity}
    start = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        log.write(f"$ {shlex.join(command)}\n")
        log.flush()
        try:
            code = subprocess.run(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd, env=env
            ).returncode
        except OSError as exc:
            log.write(f"cannot start the command: {exc}\n")
            code = 127
        log.write(f"[exit code {code} after {time.monotonic() - start:.1f} s]\n")
    return code


def _tail(text: str) -> List[str]:
    """The last :data:`TAIL_LINES` lines of ``text``."""
    return text.splitlines()[-TAIL_LINES:]


def _judge(job: Job, run_dir: Path, code: int, seconds: float) -> JobResult:
    """The result of a job that ran: ``ok`` when it exited 0 and left ``metrics.json``."""
    log = run_dir / "log.txt"
    tail = _tail(log.read_text(encoding="utf-8", errors="replace")) if log.exists() else []
    if code != 0:
        return JobResult(job, "failed", code, seconds, f"exit code {code}", tail)
    if not (run_dir / "metrics.json").exists():
        return JobResult(job, "failed", code, seconds, "exit code 0 but no metrics.json was written", tail)
    return JobResult(job, "ok", code, seconds)


def identity_command(job: Job, make_command: MakeCommand) -> str:
    """The job's command line with ``{output}`` left as a placeholder, and ``python`` for the current
    interpreter (which names a machine's folders, not a setting): what its identity records."""
    try:
        args = list(make_command(job.dataset, job.scheme, job.seed, "{output}"))
    except Exception as exc:  # a broken template fails the job when it runs; no identity to match
        return f"<no command: {exc!r}>"
    if args and args[0] == sys.executable:
        args[0] = "python"
    return shlex.join(args)


def _read_identity(metrics: Path) -> Tuple[Optional[dict], object]:
    """metrics.json's object (None: unreadable) and its ``identity`` (None: absent)."""
    try:
        data = json.loads(metrics.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None, None
    return (data, data.get("identity")) if isinstance(data, dict) else (None, None)


def _staleness(
    job: Job, make_command: MakeCommand, results_dir: Path, cwd: Optional[PathLike]
) -> Tuple[Optional[str], List[str]]:
    """Why the job's metrics.json is not current (None: it is; "": there is none), and, when its
    command is unchanged, the recorded input files not found (cwd: the folder local jobs work in);
    reads only."""
    metrics = job.run_dir(results_dir) / "metrics.json"
    if not metrics.exists():
        return "", []
    identity = _read_identity(metrics)[1]
    command = identity_command(job, make_command)
    reason = stale_reason(identity, command, cwd)
    unchanged = isinstance(identity, dict) and identity.get("command") == command
    return reason, absent_inputs(identity, cwd) if reason and unchanged else []


def _check_done(
    jobs: Sequence[Job], make_command: MakeCommand, results_dir: Path, cwd: Optional[PathLike]
) -> Dict[Job, Optional[str]]:
    """Each job's :func:`_staleness` reason; out-of-date metrics.json files are then moved to
    ``metrics.stale.json`` (kept for reference, never read as a result). Runs whose inputs are not
    here (a fresh clone before ``convert``) raise ElmoFileError before anything is moved: rerun, each
    would only fail, and their results would be set aside."""
    checks = {job: _staleness(job, make_command, results_dir, cwd) for job in jobs}
    absent = {job.dataset: files[0] for job, (_, files) in checks.items() if files}
    if absent:
        raise ElmoFileError(absent_inputs_message(absent))
    for job, (reason, _) in checks.items():
        if reason:
            metrics = job.run_dir(results_dir) / "metrics.json"
            metrics.replace(metrics.with_name(STALE_METRICS))
    return {job: reason for job, (reason, _) in checks.items()}


def _stamp_identity(result: JobResult, make_command: MakeCommand, results_dir: Path) -> JobResult:
    """Give an ok job's metrics.json an identity (its command) when the job recorded none."""
    metrics = result.job.run_dir(results_dir) / "metrics.json"
    if result.status == "ok":
        data, identity = _read_identity(metrics)
        if data is not None and identity is None:
            data["identity"] = {
                "command": identity_command(result.job, make_command),
                "files": {},
                "seed": result.job.seed,
            }
            write_text_atomic(metrics, json.dumps(data, indent=2) + "\n")
    return result


def _run_local_job(job: Job, make_command: MakeCommand, results_dir: Path, cwd: Optional[PathLike]) -> JobResult:
    """Run one job here with ``{output}`` = its run folder."""
    run_dir = job.run_dir(results_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    try:
        command = list(make_command(job.dataset, job.scheme, job.seed, str(run_dir.resolve())))
    except Exception as exc:  # a broken template or callable fails this job only
        return JobResult(job, "failed", None, 0.0, f"could not make the command: {exc!r}")
    code = run_command(command, run_dir / "log.txt", cwd, identity_command(job, make_command))
    return _judge(job, run_dir, code, time.monotonic() - start)


def _local_backend(jobs, make_command, results_dir, max_workers, cwd) -> Iterator[JobResult]:
    """Yield the results of ``jobs`` run by ``max_workers`` local slots, as they finish (arguments:
    as in :func:`run_grid`)."""
    with ThreadPoolExecutor(max_workers=max_workers) as pool:
        futures = [pool.submit(_run_local_job, job, make_command, results_dir, cwd) for job in jobs]
        for future in as_completed(futures):
            yield future.result()


# ------------------------------------------------------------------------------------- Ray backend


def run_remote_job(
    job: Job, make_command: MakeCommand, cwd: Optional[str]
) -> Tuple[int, float, bytes, Dict[str, bytes]]:
    """The body of a Ray task: run ``job`` in a temporary folder; return what the driver needs.

    job: the job; make_command: builds its command (``{output}`` = the temporary folder); cwd: the
    working folder on the node (None: the worker's). Returns (exit code, seconds, log bytes,
    {relative path: bytes} of the files the job left in ``{output}``).
    """
    with tempfile.TemporaryDirectory(prefix="spacy-elmo-mix-job-") as tmp:
        output, log = Path(tmp) / "output", Path(tmp) / "log.txt"
        output.mkdir()
        start = time.monotonic()
        command = list(make_command(job.dataset, job.scheme, job.seed, str(output)))
        code = run_command(command, log, cwd, identity_command(job, make_command))
        files = {str(p.relative_to(output)): p.read_bytes() for p in sorted(output.rglob("*")) if p.is_file()}
        return code, time.monotonic() - start, log.read_bytes(), files


def write_returned_files(run_dir: Path, log: bytes, files: Dict[str, bytes]) -> None:
    """Write a remote job's log and files into ``run_dir`` atomically, ``metrics.json`` last.

    run_dir: the run folder; log: the log's bytes; files: relative path -> bytes.
    """
    for name, data in sorted(files.items(), key=lambda item: item[0] == "metrics.json"):
        target = (run_dir / name).resolve()
        if run_dir.resolve() not in target.parents:
            raise ValueError(f"{run_dir}: a remote job returned a file outside its folder: {name!r}")
        with atomic_write(target) as tmp:
            tmp.write_bytes(data)
    with atomic_write(run_dir / "log.txt") as tmp:
        tmp.write_bytes(log)


def _import_ray():
    """``import ray``, or a RuntimeError that says how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise RuntimeError(
            "the 'ray' backend needs Ray, which is not installed: pip install 'spacy-elmo-mix[ray]' (or ray>=2.9)"
        ) from exc
    return ray


def _bounded(call: Callable[[], object], seconds: float, message: str) -> None:
    """Run ``call`` in a daemon thread; RuntimeError(message) if it has not returned after ``seconds``
    (its own exception is re-raised)."""
    outcome: List[BaseException] = []

    def target():
        try:
            call()
        except BaseException as exc:  # handed to the caller below
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise RuntimeError(message)
    if outcome:
        raise RuntimeError(f"{message.split(' within ')[0]}: {outcome[0]}") from outcome[0]


def _ray_backend(
    jobs, make_command, results_dir, max_workers, cwd, address=None, runtime_env=None, connect_timeout=60.0
) -> Iterator[JobResult]:
    """Yield the results of ``jobs`` run as Ray tasks, as they finish; see the module docstring.

    address: the cluster (None: start a local instance with ``max_workers`` CPUs); runtime_env: Ray's
    runtime environment for the tasks (e.g. ``{"working_dir": "."}`` to ship the project to a cluster);
    connect_timeout: seconds to wait for ``ray.init``.
    """
    ray = _import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        local = {"num_cpus": max_workers, "include_dashboard": False} if address is None else {}
        _bounded(
            lambda: ray.init(address=address, runtime_env=runtime_env, log_to_driver=False, **local),
            connect_timeout,
            f"could not connect to the Ray cluster at {address or 'a new local instance'} within {connect_timeout:g} s",
        )
    remote = ray.remote(num_cpus=1, max_retries=0)(run_remote_job)
    try:
        pending = {remote.remote(job, make_command, cwd): job for job in jobs}
        while pending:
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            yield _collect_remote(pending.pop(ref), ref, ray, results_dir)
    finally:
        if started_here:
            ray.shutdown()


def _collect_remote(job: Job, ref, ray, results_dir: Path) -> JobResult:
    """Fetch a finished Ray task's outcome, write its files into the run folder and judge it."""
    run_dir = job.run_dir(results_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        code, seconds, log, files = ray.get(ref)
        write_returned_files(run_dir, log, files)
    except Exception as exc:  # a task that died, or bad returned files, fails this job only
        return JobResult(job, "failed", None, 0.0, f"the Ray task failed: {exc!r}"[:2000])
    return _judge(job, run_dir, code, seconds)


BACKENDS = {"local": _local_backend, "ray": _ray_backend}


# ----------------------------------------------------------------------------------------- the API


def free_cores() -> int:
    """The number of cores this process may run on (``os.sched_getaffinity``, else ``os.cpu_count``)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def finished_seconds(dataset: str, results_dir: Path, make_command: MakeCommand) -> Dict[str, Dict[bool, List[float]]]:
    """The training times (``train_seconds``) of the finished runs of ``dataset`` on disk, any scheme
    and seed, whose recorded command is the one this grid gives that scheme and seed (the same
    protocol and settings): ``{scheme: {on this machine's CPU: [seconds, ...]}}``."""
    found: Dict[str, Dict[bool, List[float]]]
    here, found = cpu_environment(), {}
    for job, run_dir in run_folders(results_dir):
        data, identity = _read_identity(run_dir / "metrics.json")
        if job.dataset != dataset or data is None or not isinstance(identity, dict):
            continue
        value, environment = data.get("train_seconds"), data.get("environment")
        if not isinstance(value, (int, float)) or identity.get("command") != identity_command(job, make_command):
            continue
        same_cpu = isinstance(environment, dict) and all(environment.get(k) == v for k, v in here.items())
        found.setdefault(job.scheme, {True: [], False: []})[same_cpu].append(float(value))
    return found


def _dataset_projection(
    dataset: str, todo: Sequence[Job], results_dir: Path, make_command: MakeCommand
) -> Tuple[Optional[float], str]:
    """(seconds of training the dataset's jobs in ``todo`` will take, or None; the line that says so)."""
    jobs = [job for job in todo if job.dataset == dataset]
    found = finished_seconds(dataset, results_dir, make_command)
    this_cpu = any(times[True] for times in found.values())
    cells = {scheme: times[this_cpu] for scheme, times in found.items() if times[this_cpu]}
    if not cells:
        return None, f"  {dataset}: {len(jobs)} runs; no finished run to project from"
    every = [value for values in cells.values() for value in values]
    fallback = sum(every) / len(every)
    seconds = sum(sum(cells[job.scheme]) / len(cells[job.scheme]) if job.scheme in cells else fallback for job in jobs)
    unmeasured = sorted({job.scheme for job in jobs} - set(cells))
    where = "on this CPU" if this_cpu else "on other CPUs"
    line = (
        f"  {dataset}: {len(jobs)} runs x {seconds / len(jobs) / 60:.1f} min on average (each scheme's mean "
        f"training time over {len(every)} finished runs of this protocol {where}"
    )
    if unmeasured:
        line += f"; {', '.join(unmeasured)} with none: the data set's mean"
    return seconds, line + ")"


def projected_cost(
    todo: Sequence[Job], up_to_date: int, results_dir: Path, make_command: MakeCommand, workers: int
) -> str:
    """What the jobs to do will cost: one line per data set, then the total wall time. Each job is
    projected from the finished runs of its cell at any seed (:func:`finished_seconds`), a scheme
    with none from its data set's mean; runs recorded on this machine's CPU (``environment`` in
    metrics.json) are used when the data set has any, since an epoch's cost differs between CPUs by
    up to 2.4x, otherwise those of other CPUs."""
    lines, total, unknown = [f"{len(todo)} runs to do, {up_to_date} up to date, {workers} workers"], 0.0, []
    for dataset in sorted({job.dataset for job in todo}):
        seconds, line = _dataset_projection(dataset, todo, results_dir, make_command)
        lines.append(line)
        if seconds is None:
            unknown.append(dataset)
        else:
            total += seconds
    unmeasured = (
        f"the runs of {', '.join(unknown)} (unknown until one finishes; bench/protocol_cost.py measures an epoch)"
    )
    if total:
        lines.append(
            f"projected: {total / workers / 3600:.1f} h of wall time" + (f" plus {unmeasured}" if unknown else "")
        )
    elif unknown:
        lines.append(f"projected: {unmeasured}")
    return "\n".join(lines)


def grid_jobs(datasets: Sequence[str], schemes: Sequence[str], seeds: Sequence[int]) -> List[Job]:
    """All jobs, seed-major (every cell gets its first seed before any gets its second); a value given
    twice runs once. Dataset and scheme ids name folders, so each must be one plain path component."""
    for kind, names in (("dataset", datasets), ("scheme", schemes)):
        bad = [name for name in names if name in ("", ".", "..") or "/" in name or "\\" in name]
        if bad:
            raise ElmoInputError(f"{kind} id {bad[0]!r} cannot name a run folder: give a plain name")
    # cast: mypy joins the three lists' element types (str, str, int) to object
    datasets, schemes, seeds = cast(
        Iterator[Any], (list(dict.fromkeys(values)) for values in (datasets, schemes, map(int, seeds)))
    )
    return [Job(d, s, n) for n in seeds for d in datasets for s in schemes]


def run_grid(
    datasets: Sequence[str],
    schemes: Sequence[str],
    seeds: Sequence[int],
    make_command: Union[MakeCommand, str],
    backend: str = "local",
    results_dir: PathLike = "results",
    max_workers: Optional[int] = None,
    address: Optional[str] = None,
    cwd: Optional[PathLike] = None,
    runtime_env: Optional[dict] = None,
    progress: bool = True,
    connect_timeout: float = 60.0,
) -> GridSummary:
    """Run every (dataset, scheme, seed) job without an up-to-date ``metrics.json`` (module docstring).

    datasets/schemes/seeds: the grid; make_command: ``(dataset, scheme, seed, output) -> args`` or a
    template string for :class:`CommandTemplate`; backend: ``local`` or ``ray``; results_dir: the
    results folder; max_workers: parallel jobs (local) or CPUs of a new local Ray instance (default:
    :func:`free_cores`); address: the Ray cluster (``ray`` only; None: a local instance); cwd: the
    jobs' working folder (local default: ours; ray default: the worker's); runtime_env: Ray's runtime
    environment (``ray`` only); progress: show a tqdm bar; connect_timeout: seconds to wait for Ray to
    connect (``ray`` only). Returns the :class:`GridSummary`.
    """
    from tqdm import tqdm

    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; use one of {', '.join(BACKENDS)}")
    make_command = CommandTemplate(make_command) if isinstance(make_command, str) else make_command
    results_dir = Path(results_dir)
    jobs = grid_jobs(datasets, schemes, seeds)
    reasons = _check_done(jobs, make_command, results_dir, cwd if backend == "local" else None)
    done = {job: JobResult(job, "skipped") for job, reason in reasons.items() if reason is None}
    reruns = {job: reason or "" for job, reason in reasons.items()}
    todo = [job for job in jobs if job not in done]
    workers = max_workers or free_cores()
    if progress and todo:
        print(projected_cost(todo, len(done), results_dir, make_command, workers), file=sys.stderr)
    extra = (
        {"address": address, "runtime_env": runtime_env, "connect_timeout": connect_timeout} if backend == "ray" else {}
    )
    with tqdm(total=len(todo), desc="grid", unit="job", disable=not progress or not todo) as bar:
        ticker = _Ticker(bar, list(todo), results_dir) if progress and todo else None
        try:
            for result in BACKENDS[backend](todo, make_command, results_dir, workers, cwd, **extra):
                result.rerun = reruns[result.job]
                done[result.job] = _stamp_identity(result, make_command, results_dir)
                if ticker:
                    ticker.finished(result)
                bar.update()
        finally:  # also when a backend fails: no thread refreshing a closed bar
            if ticker:
                ticker.stop()
    return GridSummary([done[job] for job in jobs], results_dir)


class _Ticker:
    """Refreshes a grid bar's postfix every :data:`STATUS_SECONDS` from a thread: failed jobs so far
    and :func:`running_status` of the pending ones."""

    def __init__(self, bar, pending: List[Job], results_dir: Path) -> None:
        self.bar, self.pending, self.results_dir = bar, pending, results_dir
        self.seen: Dict[Job, float]
        self.since, self.failed, self.seen = time.time(), 0, {}
        self.lock, self.stopping = threading.Lock(), threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def finished(self, result: JobResult) -> None:
        with self.lock:
            self.pending.remove(result.job)
            self.failed += result.status == "failed"
        self._refresh()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()

    def _run(self) -> None:
        while not self.stopping.wait(STATUS_SECONDS):
            self._refresh()

    def _refresh(self) -> None:
        with self.lock:
            line = running_status(self.pending, self.results_dir, self.since, self.seen)
            if self.failed:
                line = f"{self.failed} failed; {line}"
            self.bar.set_postfix_str(line)


def running_status(pending: Sequence[Job], results_dir: Path, since: float, seen: Dict[Job, float]) -> str:
    """One line on the pending jobs that are running: those whose ``log.txt`` was written after
    ``since`` (a ``time.time()``), each with its minutes since ``seen`` first held it (updated here)
    and, from its ``train_log.jsonl`` when there is one, its epoch and best score so far."""
    parts = []
    for job in pending:
        run_dir = job.run_dir(results_dir)
        try:
            if (run_dir / "log.txt").stat().st_mtime < since:
                continue
        except OSError:
            continue
        started = seen.setdefault(job, time.time())
        parts.append(f"{job} {(time.time() - started) / 60:.0f} min{_training_state(run_dir / TRAIN_LOG)}")
    return "running: " + (", ".join(parts) if parts else "none yet")


def _training_state(train_log: Path) -> str:
    """ ", epoch E (best S)": the last evaluation's epoch and the best score so far; "" when there is
    none (yet). Lines that do not parse (the one being written) are passed over."""
    try:
        lines = train_log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    records = []
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and record.get("epoch") is not None:
            records.append(record)
    if not records:
        return ""
    scores = [r["score"] for r in records if isinstance(r.get("score"), (int, float))]
    return f", epoch {records[-1]['epoch']}" + (f" (best {max(scores):.4g})" if scores else "")
