#!/usr/bin/env python
"""The hostile-input battery: feed spacy-elmo-mix bad inputs and count how it copes (issue 11).

Usage::

    python tests/battery/hostile_inputs.py [--only GROUP ...] [--case SUBSTRING] [--json OUT] [--timeout S]

Every case is built in its own fresh temporary folder (nothing is written into the checkout) and run
in a subprocess: CLI cases as ``python -m spacy_elmo_mix ...``, API cases as a small Python snippet.
Outcomes (see tests/battery/README.md):

- ``ok``: accepted and the result is right (each such case checks it);
- ``clear``: rejected with exit status 1 and ONE stderr line without a traceback (CLI), or with the
  package's exception, a subclass of ``ElmoMixError`` with a one-line message (API); the message must
  name the offending file / key / value (each case says which substring). Allowances: argparse's own
  usage errors (status 2, ``prog: error: ...``) and thinc's ``ConfigValidationError`` for a config
  value count as clear when they name the value;
- ``crash``: a traceback, an unexpected exception type, another exit status, an error message that
  is not one line or does not name what is wrong, or a rejection only after the work it should have
  prevented (training into an unwritable folder);
- ``wrong``: accepted (status 0) but the result is wrong, or a bad input accepted silently;
- ``hang``: timed out (network cases: 15 s);
- ``lost``: files the user had (a trained model, a read-only folder) were changed or destroyed.

It always exits 0: it measures. Needs ../shared/elmo_fixtures (the tiny fixture model).
"""

from __future__ import annotations

import argparse
import hashlib
import http.server
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("SPACY_ELMO_MIX_SHARED", REPO.parent / "shared"))
FIXTURE = SHARED / "elmo_fixtures" / "tf_fixture"
TINY_RANDOM = SHARED / "elmo_fixtures" / "reference" / "tiny_random"
OUTCOMES = ("ok", "clear", "crash", "wrong", "hang", "lost")
# A silent server must fail within the download timeout (spacy_elmo_mix.bilm.files.DEFAULT_TIMEOUT,
# 10 s) plus the case's process start-up (python, spaCy, torch: up to ~8 s on a loaded 2-core machine).
NETWORK_TIMEOUT = 10.0 + 8.0
TEXT = "The bank raised its rates . Rates rose again ."
SENTENCES = ["The bank raised its rates .", "Rates rose again .", "A dog saw the ball in the city !"]
CONLL = "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP B-MISC\ncall NN I-NP O\n\nPeter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n"
SIZE_FLAGS = [
    "--lstm-dim",
    "24",
    "--projection-dim",
    "8",
    "--filters",
    "1:4,2:8",
    "--char-dim",
    "4",
    "--min-count",
    "1",
]
RUN_FLAGS = ["--max-steps", "2", "--batch-tokens", "200", "--no-progress"]
PRETRAIN_FLAGS = SIZE_FLAGS + RUN_FLAGS
# 30 s of training without checkpoints: an output problem found only after training shows as late
TRAIN_30S = [
    "--max-steps",
    "1000000",
    "--max-minutes",
    "0.5",
    "--checkpoint-every",
    "1000000",
    "--eval-every",
    "1000000",
]
PROGRESS_LINE = re.compile(r"\d+%\|| \d+/\d+ \[|it/s\]|s/it\]")
WARNING_LINE = re.compile(r"^\S.*:\d+: \w*Warning: ")


# ---------------------------------------------------------------------------------- case records
@dataclass
class Run:
    """How to run one case and judge its outcome.

    argv: CLI arguments after ``python -m spacy_elmo_mix`` (a CLI case), or
    code: a Python snippet (an API case; it may call ``wrong(why)`` when a result is wrong);
    needle: what the error message must contain, case-insensitive; ``a|b``: either;
    check: for an accepted CLI input, returns None when the result is right, else why it is wrong;
    protect: files/folders the user had, which must be unchanged afterwards;
    stdin: bytes given on standard input; timeout: seconds (default: --timeout);
    late_after: a rejection that comes after this many seconds came only after the work it should
    have prevented (e.g. training into an unwritable folder): it counts as a crash.
    """

    argv: Optional[List[str]] = None
    code: Optional[str] = None
    needle: str = ""
    check: Optional[Callable[["Result"], Optional[str]]] = None
    protect: Sequence[Path] = ()
    stdin: bytes = b""
    timeout: Optional[float] = None
    late_after: Optional[float] = None


@dataclass
class Result:
    """What a case's subprocess did: exit status, output, duration, the API outcome record."""

    folder: Path
    rc: Optional[int]
    stdout: str
    stderr: str
    seconds: float
    api: Optional[dict] = None


@dataclass
class Case:
    group: str
    name: str
    expect: str
    build: Callable[[Path, "Env"], Run]


@dataclass
class Verdict:
    group: str
    name: str
    expect: str
    outcome: str
    reason: str
    seconds: float


CASES: List[Case] = []


def case(group: str, name: str, expect: str = "clear"):
    """Register a case builder ``build(folder, env) -> Run``; expect: "ok", "clear" or "ok|clear"."""

    def register(build):
        CASES.append(Case(group, name, expect, build))
        return build

    return register


# ---------------------------------------------------------------------------------- environment
API_WRAPPER = r"""
import json, os, sys
os.chdir(sys.argv[1])

class WrongResult(Exception):
    pass

def wrong(why):
    raise WrongResult(why)

namespace = {"wrong": wrong, "__name__": "__case__"}
namespace.update(json.loads(os.environ["BATTERY_VARS"]))
try:
    exec(compile(open("case.py", encoding="utf-8").read(), "case.py", "exec"), namespace)
    out = {"status": "ok"}
except WrongResult as exc:
    out = {"status": "wrong", "message": str(exc)}
except BaseException as exc:
    from spacy_elmo_mix.errors import ElmoMixError
    kind = type(exc)
    out = {"status": "raised", "type": f"{kind.__module__}.{kind.__qualname__}", "message": str(exc),
           "elmo": isinstance(exc, ElmoMixError), "config_error": kind.__name__ == "ConfigValidationError"}
with open(os.path.join(sys.argv[1], "_outcome.json"), "w", encoding="utf-8") as handle:
    json.dump(out, handle)
"""

API_HELPERS = r'''
import numpy as np

def elmo_nlp(options=OPTIONS, weights=WEIGHTS, scheme=None, **model):
    """A blank English pipeline with an initialized elmo component on the given files."""
    import spacy
    nlp = spacy.blank("en")
    config = {"model": {"options_file": options and str(options), "weight_file": weights and str(weights), **model}}
    if scheme is not None:
        config["scheme"] = scheme
    nlp.add_pipe("elmo", config=config)
    nlp.initialize()
    return nlp

def layers_of(nlp, texts):
    return [nlp(t)._.elmo_layers for t in texts]

def same(got, ref, what, atol=1e-6):
    """wrong() unless got equals ref within atol: float32 rounding of the same computation (1e-6) by
    default; computations grouped differently (another batch) take tests/test_bilm_batching.py's
    BATCH_TOLERANCE (1e-5)."""
    if len(got) != len(ref):
        wrong(f"{what}: {len(got)} arrays, expected {len(ref)}")
    for i, (g, r) in enumerate(zip(got, ref)):
        if g is None or g.shape != r.shape:
            wrong(f"{what}: array {i} has shape {None if g is None else g.shape}, expected {r.shape}")
        diff = float(np.abs(g.astype("float64") - r).max()) if g.size else 0.0
        if not np.isfinite(g).all() or diff > atol:
            wrong(f"{what}: array {i} differs from the reference by {diff:.3g}")
'''


class Env:
    """The session: a scratch folder, shared assets (built once), test servers, subprocess runners."""

    def __init__(self, root: Path, timeout: float):
        self.root, self.timeout = root, timeout
        self.home = root / "home"
        self.home.mkdir()
        (root / "api_wrapper.py").write_text(API_WRAPPER, encoding="utf-8")
        self._assets: Optional[Path] = None
        self.hang_port = _start_silent_server()
        self.http_port = _start_404_server()
        self.vars = {
            "OPTIONS": str(FIXTURE / "options.json"),
            "WEIGHTS": str(FIXTURE / "lm_weights.hdf5"),
            "TINY_RANDOM": str(TINY_RANDOM),
            "TEXT": TEXT,
            "SENTENCES": SENTENCES,
        }

    # -- subprocesses ----------------------------------------------------------------------------
    def environ(self) -> Dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SPACY_ELMO_MIX_DEBUG")}
        env.update(
            OMP_NUM_THREADS="1",
            MKL_NUM_THREADS="1",
            HOME=str(self.home),
            PYTHONDONTWRITEBYTECODE="1",
            CACHED_PATH_CACHE_ROOT=str(self.home / "cached_path"),
            BATTERY_VARS=json.dumps(self.vars),
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
        )
        return env

    def execute(self, command: List[str], folder: Path, stdin: bytes = b"", timeout: Optional[float] = None) -> Result:
        """Run ``command`` in ``folder``; as root, without the capabilities that ignore file permissions
        (so read-only folders are read-only, as for any user)."""
        if os.geteuid() == 0 and shutil.which("setpriv"):
            command = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", *command]
        start = time.perf_counter()
        proc = subprocess.Popen(
            command,
            cwd=folder,
            env=self.environ(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(stdin, timeout=timeout or self.timeout)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            out, err = proc.communicate()
            rc = None
        text = lambda b: b.decode("utf-8", "replace")  # noqa: E731
        return Result(folder, rc, text(out), text(err), time.perf_counter() - start)

    def cli(self, argv: List[str], folder: Path, stdin: bytes = b"", timeout: Optional[float] = None) -> Result:
        return self.execute([sys.executable, "-m", "spacy_elmo_mix", *argv], folder, stdin, timeout)

    def api(self, code: str, folder: Path, timeout: Optional[float] = None) -> Result:
        (folder / "case.py").write_text(API_HELPERS + code, encoding="utf-8")
        outcome = folder / "_outcome.json"
        outcome.unlink(missing_ok=True)
        result = self.execute([sys.executable, str(self.root / "api_wrapper.py"), str(folder)], folder, timeout=timeout)
        if outcome.exists():
            result.api = json.loads(outcome.read_text(encoding="utf-8"))
        return result

    # -- shared assets ---------------------------------------------------------------------------
    def assets(self) -> Path:
        """A saved pipeline on the fixture model (``pipeline/``), its layers for TEXT (``ref.npy``) and a
        small ``corpus.spacy``; built once per session."""
        if self._assets is None:
            folder = self.root / "assets"
            folder.mkdir()
            code = """
import spacy
from spacy.tokens import Doc, DocBin
nlp = elmo_nlp()
np.save("ref.npy", nlp(TEXT)._.elmo_layers)
nlp.to_disk("pipeline")
docs = DocBin()
for s in SENTENCES:
    docs.add(Doc(nlp.vocab, words=s.split()))
docs.to_disk("corpus.spacy")
"""
            result = self.api(code, folder, timeout=300)
            if not (result.api or {}).get("status") == "ok":
                raise SystemExit(f"could not build the shared assets: {result.api} {result.stderr[-2000:]}")
            self._assets = folder
        return self._assets

    def url(self, name: str, port: Optional[int] = None) -> str:
        return f"http://127.0.0.1:{port or self.hang_port}/{name}"


def _start_silent_server() -> int:
    """A TCP server that accepts connections and never answers (in a daemon thread); its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held = []

    def serve():
        while True:
            conn, _ = server.accept()
            held.append(conn)

    threading.Thread(target=serve, daemon=True).start()
    return server.getsockname()[1]


def _start_404_server() -> int:
    """An HTTP server answering 404 to everything (in a daemon thread); its port."""

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_error(404)

        do_HEAD = do_GET  # noqa: N815

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


# ---------------------------------------------------------------------------------- judging
def snapshot(paths: Sequence[Path]) -> Dict[str, str]:
    """sha256 of every file under ``paths`` (and a marker for each folder)."""
    digests = {}
    for top in paths:
        items = [top] if top.is_file() else sorted(top.rglob("*")) if top.is_dir() else []
        digests[str(top)] = "dir" if top.is_dir() else "file" if top.is_file() else "absent"
        for path in items:
            if path.is_file():
                digests[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests


def has_needle(message: str, needle: str) -> bool:
    return not needle or any(n.lower() in message.lower() for n in needle.split("|"))


def error_lines(stderr: str, rc: int) -> List[str]:
    """The stderr lines that are not progress bars, warnings (and their source line) or argparse usage."""
    lines, skip_next = [], False
    for line in re.split(r"[\r\n]+", stderr):
        if skip_next:
            skip_next = False
            continue
        if not line.strip() or PROGRESS_LINE.search(line):
            continue
        if WARNING_LINE.search(line):
            skip_next = True
            continue
        lines.append(line)
    if rc == 2:
        lines = [line for line in lines if re.match(r"^python -m spacy_elmo_mix \w+: error: ", line)] or lines
    return lines


def judge_error_cli(result: Result, needle: str) -> tuple:
    if "Traceback (most recent call last)" in result.stderr:
        last = [line for line in result.stderr.strip().splitlines() if line.strip()][-1:]
        return "crash", f"traceback: {last[0][:150] if last else ''}"
    lines = error_lines(result.stderr, result.rc)
    if result.rc == 2 and not (lines and ": error: " in lines[0] and lines[0].startswith("python -m")):
        return "crash", f"exit status 2: {lines[-1][:150] if lines else '(no message)'}"
    if not lines:
        tail = [line for line in result.stdout.splitlines() if line.strip()][-2:]
        return "crash", f"unclear: exit status {result.rc}, nothing on stderr; stdout ends: {' / '.join(tail)[:150]}"
    if len(lines) != 1:
        return "crash", f"unclear: {len(lines)} stderr lines: {' / '.join(lines)[:150]}"
    if not has_needle(lines[0], needle):
        return "crash", f"unclear: message does not name {needle!r}: {lines[0][:150]}"
    return "clear", lines[0][:200]


def judge_error_api(record: dict, needle: str) -> tuple:
    message = record["message"]
    first = message.strip().splitlines()[0] if message.strip() else ""
    if record["config_error"] and has_needle(message, needle):
        return "clear", f"ConfigValidationError: {' '.join(message.split())[:200]}"
    if not record["elmo"]:
        return "crash", f"{record['type']}: {first[:150]}"
    if "\n" in message.strip():
        return "crash", f"unclear: multi-line message: {first[:150]}"
    if not has_needle(message, needle):
        return "crash", f"unclear: message does not name {needle!r}: {first[:150]}"
    return "clear", f"{record['type'].rsplit('.', 1)[-1]}: {first[:200]}"


def judge(c: Case, run: Run, result: Result, before: Dict[str, str]) -> tuple:
    after = snapshot(run.protect)
    changed = sorted(k for k in before if before[k] != after.get(k))  # new files are not losses
    if changed:
        return "lost", "changed or removed: " + ", ".join(Path(k).name for k in changed[:4])
    if result.rc is None:
        return "hang", f"no answer within {result.seconds:.0f} s"
    leftovers = [p.name for p in result.folder.rglob(".*.tmp")]
    if leftovers:
        return "wrong", f"half-written temp file(s) left behind: {', '.join(leftovers[:3])}"
    # the temp folders' random names must not match a needle (and make the reasons long)
    clean = lambda text: text.replace(str(result.folder), "<case>").replace(str(result.folder.parent), "<tmp>")  # noqa: E731
    result.stderr, result.stdout = clean(result.stderr), clean(result.stdout)
    if result.api and "message" in result.api:
        result.api["message"] = clean(result.api["message"])
    accepted = "accepted without error"
    if run.code is not None:
        record = result.api
        if record is None:
            return "crash", f"the process died (exit status {result.rc}): {result.stderr.strip()[-150:]}"
        if record["status"] == "wrong":
            return "wrong", record["message"][:200]
        if record["status"] == "ok":
            return ("ok", "result checked") if "ok" in c.expect else ("wrong", accepted)
        return judge_error_api(record, run.needle)
    if result.rc == 0:
        if run.check is not None:
            why = run.check(result)
            return ("ok", "result checked") if why is None else ("wrong", why[:200])
        return ("ok", "accepted") if "ok" in c.expect else ("wrong", f"{accepted} (exit status 0)")
    if result.rc in (1, 2):
        outcome, reason = judge_error_cli(result, run.needle)
        if outcome == "clear" and run.late_after and result.seconds > run.late_after:
            return "crash", f"late: rejected only after {result.seconds:.0f} s of work: {reason}"
        return outcome, reason
    return "crash", f"exit status {result.rc}: {result.stderr.strip()[-150:]}"


def run_case(c: Case, env: Env) -> Verdict:
    folder = Path(tempfile.mkdtemp(prefix="case-", dir=env.root))
    try:
        run = c.build(folder, env)
        before = snapshot(run.protect)
        if run.code is not None:
            result = env.api(run.code, folder, run.timeout)
        else:
            result = env.cli(run.argv, folder, run.stdin, run.timeout)
        outcome, reason = judge(c, run, result, before)
        seconds = result.seconds
    except Exception as exc:  # a harness bug: report it as the case's outcome rather than stop
        outcome, reason, seconds = "crash", f"HARNESS ERROR {type(exc).__name__}: {exc}", 0.0
    finally:
        _make_writable(folder)
        shutil.rmtree(folder, ignore_errors=True)
    return Verdict(c.group, c.name, c.expect, outcome, reason, round(seconds, 1))


def _make_writable(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)


# ---------------------------------------------------------------------------------- file builders
def put(path: Path, data) -> Path:
    """Write ``data`` (bytes or str) to ``path``; return the path."""
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


def fixture_options() -> dict:
    return json.loads((FIXTURE / "options.json").read_text(encoding="utf-8"))


def write_options(path: Path, change: Optional[Callable[[dict], None]] = None, text: Optional[str] = None) -> Path:
    """The fixture's options.json, changed by ``change(options)``, or ``text`` as it stands."""
    if text is None:
        options = fixture_options()
        if change:
            change(options)
        text = json.dumps(options)
    path.write_text(text, encoding="utf-8")
    return path


def edit_weights(path: Path, change: Callable) -> Path:
    """A copy of the fixture weights at ``path``, changed by ``change(h5py_file)``."""
    import h5py

    shutil.copyfile(FIXTURE / "lm_weights.hdf5", path)
    with h5py.File(path, "r+") as f:
        change(f)
    return path


def setdeep(keys: str, value) -> Callable[[dict], None]:
    """A change setting options[k1][k2]... = value (``"lstm.dim"``); value ``DELETE`` removes the key."""

    def change(options: dict) -> None:
        *parents, last = keys.split(".")
        node = options
        for key in parents:
            node = node[key]
        if value is DELETE:
            del node[last]
        else:
            node[last] = value

    return change


DELETE = object()


def embed_argv(options, weights, *sentences: str) -> List[str]:
    return ["embed", "--options", str(options), "--weights", str(weights), *(sentences or ["a b c"])]


def fixture_files(folder: Path) -> tuple:
    return FIXTURE / "options.json", FIXTURE / "lm_weights.hdf5"


def npz_check(path: Path, shapes: List[tuple]) -> Callable[[Result], Optional[str]]:
    """A check: ``path`` holds one finite array per sentence with these shapes."""

    def check(result: Result) -> Optional[str]:
        import numpy as np

        if not path.exists():
            return f"{path.name} not written"
        with np.load(path) as data:
            arrays = [data[f"sentence_{i}"] for i in range(len(data.files))]
        got = [a.shape for a in arrays]
        if got != shapes:
            return f"shapes {got}, expected {shapes}"
        if not all(np.isfinite(a).all() for a in arrays):
            return "non-finite values in the output"
        return None

    return check


# ================================================================================== the cases
# ---- embed: text inputs to the CLI, ElmoEmbedder and the pipeline ------------------------------
@case("embed", "cli_empty_sentence", "ok|clear")
def _(d, env):
    return Run(
        embed_argv(*fixture_files(d), "", "--output", "out.npz"),
        needle="empty",
        check=npz_check(d / "out.npz", [(3, 0, 32)]),
    )


@case("embed", "cli_whitespace_only_sentence", "ok|clear")
def _(d, env):
    return Run(
        embed_argv(*fixture_files(d), "   \t ", "--output", "out.npz"),
        needle="empty",
        check=npz_check(d / "out.npz", [(3, 0, 32)]),
    )


@case("embed", "cli_stdin_invalid_utf8", "ok|clear")
def _(d, env):
    options, weights = fixture_files(d)
    return Run(
        ["embed", "--options", str(options), "--weights", str(weights), "--output", "out.npz"],
        stdin=b"caf\xe9 au lait\nok line\n",
        needle="stdin|utf-8|utf8",
        check=npz_check(d / "out.npz", [(3, 3, 32), (3, 2, 32)]),
    )


@case("embed", "cli_stdin_nul_and_controls", "ok|clear")
def _(d, env):
    options, weights = fixture_files(d)
    return Run(
        ["embed", "--options", str(options), "--weights", str(weights), "--output", "out.npz"],
        stdin=b"a\x00b c\x1b[31m d\nplain words here\n",
        needle="stdin|control",
        check=npz_check(d / "out.npz", [(3, 3, 32), (3, 3, 32)]),
    )


@case("embed", "cli_output_under_a_file")
def _(d, env):
    (d / "afile").write_text("x", encoding="utf-8")
    return Run(embed_argv(*fixture_files(d), "a b", "--output", "afile/out.npz"), needle="afile", protect=[d / "afile"])


@case("embed", "cli_output_is_a_folder")
def _(d, env):
    (d / "outdir").mkdir()

    def elsewhere(result):
        return "exit status 0, wrote outdir.npz instead" if (d / "outdir.npz").exists() else "exit status 0, no output"

    return Run(
        embed_argv(*fixture_files(d), "a b", "--output", "outdir"),
        needle="outdir",
        protect=[d / "outdir"],
        check=elsewhere,
    )


@case("embed", "cli_top_layer_too_high")
def _(d, env):
    return Run(embed_argv(*fixture_files(d), "a b", "--top-layer", "7"), needle="7")


@case("embed", "cli_top_layer_negative")
def _(d, env):
    return Run(embed_argv(*fixture_files(d), "a b", "--top-layer", "-1"), needle="-1")


@case("embed", "cli_only_options_given")
def _(d, env):
    return Run(["embed", "--options", str(FIXTURE / "options.json"), "a b"], needle="--weights")


def embedder_code(body: str) -> str:
    return "from spacy_elmo_mix import ElmoEmbedder\nelmo = ElmoEmbedder(OPTIONS, WEIGHTS)\n" + body


@case("embed", "api_empty_sentence", "ok|clear")
def _(d, env):
    return Run(
        code=embedder_code("a = elmo.embed_sentence([])\nif a.shape != (3, 0, 32): wrong(f'shape {a.shape}')\n"),
        needle="empty",
    )


@case("embed", "api_empty_token", "ok|clear")
def _(d, env):
    return Run(
        code=embedder_code(
            "a = elmo.embed_sentence(['', 'a'])\nif a.shape != (3, 2, 32) or not np.isfinite(a).all(): wrong(f'shape {a.shape}')\n"
        ),
        needle="token 0|''|empty",
    )


@case("embed", "api_huge_token", "ok")
def _(d, env):
    return Run(
        code=embedder_code(
            "big = elmo.embed_sentence(['x' * 100000, 'y'])\ncut = elmo.embed_sentence(['x' * 48, 'y'])\n"
            "same([big], [cut], 'a 100k-char token vs its first 48 bytes')\n"
        )
    )


@case("embed", "api_huge_multibyte_token", "ok")
def _(d, env):
    return Run(
        code=embedder_code(
            "a = elmo.embed_sentence(['\\u00e9' * 50000, '\\U0001F600' * 1000])\n"
            "if a.shape != (3, 2, 32) or not np.isfinite(a).all(): wrong(f'shape {a.shape} or non-finite')\n"
        )
    )


@case("embed", "api_control_chars", "ok")
def _(d, env):
    return Run(
        code=embedder_code(
            "a = elmo.embed_sentence(['\\x00', '\\x1b[31m', '\\u200b', '\\ufeff', '\\t'])\n"
            "if a.shape != (3, 5, 32) or not np.isfinite(a).all(): wrong(f'shape {a.shape} or non-finite')\n"
        )
    )


@case("embed", "api_lone_surrogate", "ok|clear")
def _(d, env):
    return Run(
        code=embedder_code(
            "a = elmo.embed_sentence(['a\\ud800b'])\nif a.shape != (3, 1, 32) or not np.isfinite(a).all(): wrong('bad output')\n"
        ),
        needle="ud800|surrogate|token",
    )


@case("embed", "api_non_str_token")
def _(d, env):
    return Run(code=embedder_code("elmo.embed_sentence(['a', 3])\n"), needle="3")


@case("embed", "api_str_instead_of_tokens")
def _(d, env):
    return Run(code=embedder_code("elmo.embed_sentence('a sentence')\n"), needle="str")


@case("embed", "api_none_sentence")
def _(d, env):
    return Run(code=embedder_code("list(elmo.embed_sentences([['a'], None]))\n"), needle="None|sentence 1")


@case("embed", "api_batch_size_zero")
def _(d, env):
    return Run(code=embedder_code("list(elmo.embed_sentences([['a']], batch_size=0))\n"), needle="batch_size")


@case("embed", "api_dtype_float16")
def _(d, env):
    return Run(
        code="from spacy_elmo_mix import ElmoEmbedder\nElmoEmbedder(OPTIONS, WEIGHTS, dtype='float16')\n",
        needle="float16",
    )


@case("embed", "pipeline_10k_token_doc", "ok")
def _(d, env):
    return Run(
        code="nlp = elmo_nlp()\nwords = ('the bank raised its rates . ' * 1700).split()[:10000]\n"
        "from spacy.tokens import Doc\ndoc = nlp(Doc(nlp.vocab, words=words))\nlayers = doc._.elmo_layers\n"
        "if layers.shape != (3, 10000, 32) or not np.isfinite(layers).all(): wrong(f'layers {layers.shape}')\n"
        "if doc.tensor.shape != (10000, 32): wrong(f'tensor {doc.tensor.shape}')\n",
        timeout=120,
    )


@case("embed", "pipeline_empty_text", "ok")
def _(d, env):
    return Run(
        code="nlp = elmo_nlp()\ndoc = nlp('')\nif doc._.elmo_layers is None or doc._.elmo_layers.shape[1] != 0: "
        "wrong(f'layers {None if doc._.elmo_layers is None else doc._.elmo_layers.shape}')\n"
    )


@case("embed", "pipeline_whitespace_and_controls", "ok")
def _(d, env):
    return Run(
        code="nlp = elmo_nlp()\ndoc = nlp('  \\n\\t \\x00 \\x07 a\\u200bb  ')\nl = doc._.elmo_layers\n"
        "if l is None or l.shape[1] != len(doc) or not np.isfinite(l).all(): wrong(f'layers {None if l is None else l.shape} for {len(doc)} tokens')\n"
    )


@case("embed", "pipeline_batch_independent", "ok")
def _(d, env):
    return Run(
        code="nlp = elmo_nlp()\nalone = [nlp(t)._.elmo_layers for t in SENTENCES]\n"
        "piped = [d._.elmo_layers for d in nlp.pipe(SENTENCES + ['x ' * 300], batch_size=4)][:3]\n"
        "same(piped, alone, 'nlp.pipe vs one doc at a time', atol=1e-5)\n"
    )


# ---- model files ---------------------------------------------------------------------------------
def model_case(name: str, make: Callable[[Path], tuple], needle: str, expect: str = "clear"):
    """A CLI embed case on the (options, weights) that ``make(folder)`` writes."""

    @case("model", name, expect)
    def _(d, env):
        options, weights = make(d)
        return Run(embed_argv(options, weights, "a b c"), needle=needle)


W = lambda d: FIXTURE / "lm_weights.hdf5"  # noqa: E731
O = lambda d: FIXTURE / "options.json"  # noqa: E731, E741

model_case("options_missing", lambda d: (d / "no_options.json", W(d)), "no_options.json")
model_case("weights_missing", lambda d: (O(d), d / "no_weights.hdf5"), "no_weights.hdf5")
model_case("options_empty", lambda d: (write_options(d / "empty_options.json", text=""), W(d)), "empty_options.json")
model_case(
    "options_not_json",
    lambda d: (write_options(d / "bad_options.json", text="lstm: {dim: 64}"), W(d)),
    "bad_options.json",
)
model_case(
    "options_json_list", lambda d: (write_options(d / "list_options.json", text="[1, 2]"), W(d)), "list_options.json"
)
model_case("options_is_a_folder", lambda d: ((d / "optdir").mkdir() or d / "optdir", W(d)), "optdir")
model_case("options_latin1_bytes", lambda d: (put(d / "l1_options.json", b'{"lstm": "\xe9"}'), W(d)), "l1_options.json")
model_case("options_missing_lstm", lambda d: (write_options(d / "o.json", setdeep("lstm", DELETE)), W(d)), "lstm")
model_case(
    "options_missing_filters",
    lambda d: (write_options(d / "o.json", setdeep("char_cnn.filters", DELETE)), W(d)),
    "filters",
)
model_case(
    "options_negative_projection",
    lambda d: (write_options(d / "o.json", setdeep("lstm.projection_dim", -16)), W(d)),
    "projection_dim",
)
model_case("options_zero_dim", lambda d: (write_options(d / "o.json", setdeep("lstm.dim", 0)), W(d)), "dim")
model_case("options_dim_string", lambda d: (write_options(d / "o.json", setdeep("lstm.dim", "64")), W(d)), "dim")
model_case(
    "options_filters_garbage",
    lambda d: (write_options(d / "o.json", setdeep("char_cnn.filters", "abc")), W(d)),
    "filters",
)
model_case(
    "options_negative_filter_count",
    lambda d: (write_options(d / "o.json", setdeep("char_cnn.filters", [[1, -4]])), W(d)),
    "filters",
)
model_case(
    "options_few_characters",
    lambda d: (write_options(d / "o.json", setdeep("char_cnn.n_characters", 100)), W(d)),
    "n_characters",
)
model_case(
    "options_max_chars_2",
    lambda d: (write_options(d / "o.json", setdeep("char_cnn.max_characters_per_token", 2)), W(d)),
    "max_characters_per_token",
)
model_case(
    "options_bad_activation",
    lambda d: (write_options(d / "o.json", setdeep("char_cnn.activation", "gelu")), W(d)),
    "gelu|activation",
)
model_case(
    "options_n_layers_3",
    lambda d: (write_options(d / "o.json", setdeep("lstm.n_layers", 3)), W(d)),
    "n_layers|Cell2|layer",
)
model_case(
    "options_dim_mismatch", lambda d: (write_options(d / "o.json", setdeep("lstm.dim", 32)), W(d)), "W_0|dim|shape"
)
model_case(
    "options_fewer_highway_than_weights",
    lambda d: (write_options(d / "o.json", setdeep("char_cnn.n_highway", 1)), W(d)),
    "highway|CNN_high_1",
)
model_case(
    "options_more_highway_than_weights",
    lambda d: (write_options(d / "o.json", setdeep("char_cnn.n_highway", 3)), W(d)),
    "highway|CNN_high_2",
)
model_case("weights_empty", lambda d: (O(d), put(d / "empty.hdf5", b"")), "empty.hdf5")
model_case("weights_not_hdf5", lambda d: (O(d), put(d / "text.hdf5", "not hdf5")), "text.hdf5")
model_case(
    "weights_truncated",
    lambda d: (O(d), put(d / "cut.hdf5", (FIXTURE / "lm_weights.hdf5").read_bytes()[:60000])),
    "cut.hdf5",
)
model_case("weights_swapped_with_options", lambda d: (W(d), O(d)), "lm_weights.hdf5|options.json")
model_case(
    "weights_missing_dataset",
    lambda d: (O(d), edit_weights(d / "nodata.hdf5", lambda f: f.__delitem__("CNN_proj/W_proj"))),
    "W_proj",
)
model_case("weights_wrong_shape", lambda d: (O(d), edit_weights(d / "shape.hdf5", _reshape_proj)), "W_proj")
model_case(
    "weights_extra_highway_layer",
    lambda d: (O(d), edit_weights(d / "extra_high.hdf5", _extra_highway)),
    "highway|CNN_high_2",
)
model_case("weights_nan", lambda d: (O(d), edit_weights(d / "nan.hdf5", _nan_weights)), "nan|finite")
model_case("weights_damaged_value", lambda d: (O(d), edit_weights(d / "huge.hdf5", _huge_weight)), "CNN_proj/W_proj")
model_case("weights_int_dtype", lambda d: (O(d), edit_weights(d / "int.hdf5", _int_proj)), "W_proj|dtype|int")


def _reshape_proj(f) -> None:
    data = f["CNN_proj/W_proj"][()]
    del f["CNN_proj/W_proj"]
    f["CNN_proj/W_proj"] = data[:-1]


def _extra_highway(f) -> None:
    f.copy(f["CNN_high_1"], "CNN_high_2")


def _nan_weights(f) -> None:
    data = f["CNN_proj/W_proj"][()]
    data[0, 0] = float("nan")
    f["CNN_proj/W_proj"][...] = data


def _huge_weight(f) -> None:
    """One value of a dataset as a damaged exponent byte leaves it (finite, absurd)."""
    data = f["CNN_proj/W_proj"][()]
    data[0, 0] = 3.4e25
    f["CNN_proj/W_proj"][...] = data


def _int_proj(f) -> None:
    data = f["CNN_proj/W_proj"][()]
    del f["CNN_proj/W_proj"]
    f["CNN_proj/W_proj"] = (data * 100).astype("int32")


@case("model", "url_server_never_answers")
def _(d, env):
    return Run(
        embed_argv(env.url("options.json"), env.url("weights.hdf5"), "a b"), needle="127.0.0.1", timeout=NETWORK_TIMEOUT
    )


@case("model", "url_unresolvable_host")
def _(d, env):
    return Run(
        embed_argv("http://nonexistent.invalid/options.json", "http://nonexistent.invalid/weights.hdf5", "a b"),
        needle="nonexistent.invalid",
        timeout=NETWORK_TIMEOUT,
    )


@case("model", "url_404")
def _(d, env):
    return Run(
        embed_argv(env.url("options.json", env.http_port), env.url("weights.hdf5", env.http_port), "a b"),
        needle=f"127.0.0.1:{env.http_port}",
        timeout=NETWORK_TIMEOUT,
    )


@case("model", "add_pipe_url_server_never_answers")
def _(d, env):
    code = f"elmo_nlp({env.url('options.json')!r}, {env.url('weights.hdf5')!r})\n"
    return Run(code=code, needle="127.0.0.1", timeout=NETWORK_TIMEOUT)


@case("model", "add_pipe_options_missing")
def _(d, env):
    return Run(code="elmo_nlp('no_options.json', WEIGHTS)\n", needle="no_options.json")


@case("model", "add_pipe_only_options")
def _(d, env):
    return Run(code="elmo_nlp(OPTIONS, None)\n", needle="weight_file")


# ---- configs: add_pipe / spacy.load with bad values ----------------------------------------------
def config_case(
    name: str,
    needle: str,
    model: Optional[dict] = None,
    component: Optional[dict] = None,
    scheme: Optional[dict] = None,
):
    @case("config", name)
    def _(d, env):
        code = (
            "import spacy\nnlp = spacy.blank('en')\n"
            f"config = {{'model': {{'options_file': OPTIONS, 'weight_file': WEIGHTS, **{model or {}!r}}}, **{component or {}!r}}}\n"
            + (f"config['scheme'] = {scheme!r}\n" if scheme else "")
            + "nlp.add_pipe('elmo', config=config)\nnlp.initialize()\nnlp(TEXT)\n"
        )
        return Run(code=code, needle=needle)


config_case("compute_dtype_float8", "float8", {"compute_dtype": "float8"})
config_case("batch_size_0", "batch_size", {"batch_size": 0})
config_case("batch_size_negative", "batch_size", {"batch_size": -1})
config_case("batch_size_string", "batch_size", {"batch_size": "many"})
config_case("max_length_0", "max_length", {"max_length": 0})
config_case("max_length_negative", "max_length", {"max_length": -3})
config_case("cache_memory_mb_negative", "cache_memory_mb", {"cache_memory_mb": -5})
config_case("cache_dtype_int8", "int8", {"cache_dtype": "int8"})
config_case("unknown_model_key", "batchsize", {"batchsize": 8})
config_case("unknown_component_key", "sett_tensor", component={"sett_tensor": False})
config_case("scheme_layer_out_of_range", "7", scheme={"@layers": "spacy-elmo-mix.ScalarMix.v1", "layers": [0, 7]})
config_case(
    "scheme_initial_weights_length",
    "initial_weights",
    scheme={"@layers": "spacy-elmo-mix.ScalarMix.v1", "initial_weights": [1.0, 2.0]},
)
config_case(
    "scheme_unknown_paper_name", "layer9", scheme={"@layers": "spacy-elmo-mix.PaperScheme.v1", "name": "layer9"}
)


def saved_config_case(name: str, needle: str, old: str, new: str):
    @case("config", name)
    def _(d, env):
        shutil.copytree(env.assets() / "pipeline", d / "pipeline")
        cfg = d / "pipeline" / "config.cfg"
        text = cfg.read_text(encoding="utf-8")
        if old not in text:
            raise RuntimeError(f"{old!r} not in the saved config")
        cfg.write_text(text.replace(old, new, 1), encoding="utf-8")
        return Run(code="import spacy\nspacy.load('pipeline')(TEXT)\n", needle=needle)


saved_config_case("load_compute_dtype_float8", "float8", 'compute_dtype = "float32"', 'compute_dtype = "float8"')
saved_config_case("load_batch_size_0", "batch_size", "batch_size = 64", "batch_size = 0")
saved_config_case("load_cache_dtype_int8", "int8", 'cache_dtype = "float32"', 'cache_dtype = "int8"')


# ---- pretraining -------------------------------------------------------------------------------
def corpus_lines(n: int = 200, seed: int = 0) -> str:
    rng = random.Random(seed)
    subjects, verbs, objects = (
        ["the cat", "a dog", "my friend", "the old man"],
        ["sees", "likes", "finds"],
        ["the ball .", "a red house .", "her brother ."],
    )
    return "".join(f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}\n" for _ in range(n))


def pretrain_run(
    d: Path,
    corpus_bytes: Optional[bytes],
    *flags: str,
    needle: str = "",
    check=None,
    protect=(),
    name: str = "train.txt",
    output: str = "out",
    late_after: Optional[float] = None,
    sized: bool = True,
) -> Run:
    """A pretrain CLI run on ``corpus_bytes`` (written to ``name``) with the tiny size flags (``sized``;
    without them for runs whose size comes from ``--options`` or a checkpoint, which refuse them)."""
    if corpus_bytes is not None:
        (d / name).write_bytes(corpus_bytes)
    return Run(
        ["pretrain", name, *(PRETRAIN_FLAGS if sized else RUN_FLAGS), "--output", output, *flags],
        needle=needle,
        check=check,
        protect=list(protect),
        timeout=120,
        late_after=late_after,
    )


def vocab_check(d: Path, test: Callable[[List[str]], Optional[str]]) -> Callable[[Result], Optional[str]]:
    def check(result: Result) -> Optional[str]:
        vocab = d / "out" / "vocab.txt"
        if not vocab.exists() or not (d / "out" / "weights.hdf5").exists():
            return "no exported model"
        return test(vocab.read_text(encoding="utf-8", errors="replace").split("\n"))

    return check


def no_control_words(words: List[str]) -> Optional[str]:
    import unicodedata

    bad = [w for w in words if any(unicodedata.category(ch) in ("Cc", "Cs") or ch in "\ufeff\ufffd" for ch in w)]
    return f"{len(bad)} vocabulary words with control/BOM/replacement characters, e.g. {bad[:3]!r}" if bad else None


@case("pretrain", "empty_corpus")
def _(d, env):
    return pretrain_run(d, b"", needle="train.txt")


@case("pretrain", "blank_lines_corpus")
def _(d, env):
    return pretrain_run(d, b"\n \n\t\n" * 50, needle="train.txt")


@case("pretrain", "binary_corpus")
def _(d, env):
    return pretrain_run(d, random.Random(0).randbytes(20000), needle="train.txt")


@case("pretrain", "binary_after_8k")
def _(d, env):
    text = corpus_lines(400).encode()[:9000]
    binary = b"\x00\x01\x02abc\x00\x7f\x1b def\x00 \x05\x06 " * 300
    return pretrain_run(d, text + b"\n" + binary, needle="train.txt", check=vocab_check(d, no_control_words))


@case("pretrain", "latin1_corpus")
def _(d, env):
    text = "".join(f"le café {w} déjà vu .\n" for w in ("crème", "gâteau", "thé") * 60).encode("latin-1")
    return pretrain_run(
        d,
        text,
        needle="train.txt",
        check=vocab_check(d, lambda words: None if "café" in words else "café not in the vocabulary (mis-decoded)"),
    )


@case("pretrain", "bom_corpus", "ok")
def _(d, env):
    return pretrain_run(d, b"\xef\xbb\xbf" + corpus_lines().encode(), check=vocab_check(d, no_control_words))


@case("pretrain", "max_steps_negative")
def _(d, env):
    return pretrain_run(d, corpus_lines().encode(), "--max-steps", "-1", needle="max-steps|max_steps")


@case("pretrain", "max_steps_zero")
def _(d, env):
    return pretrain_run(d, corpus_lines().encode(), "--max-steps", "0", needle="max-steps|max_steps")


@case("pretrain", "batch_tokens_zero")
def _(d, env):
    return pretrain_run(d, corpus_lines().encode(), "--batch-tokens", "0", needle="batch-tokens|tokens_per_batch")


@case("pretrain", "max_len_zero")
def _(d, env):
    return pretrain_run(d, corpus_lines().encode(), "--max-len", "0", needle="max-len|max_len")


@case("pretrain", "lstm_dim_zero")
def _(d, env):
    return pretrain_run(d, corpus_lines().encode(), "--lstm-dim", "0", needle="lstm-dim|dim")


@case("pretrain", "filters_garbage")
def _(d, env):
    return pretrain_run(d, corpus_lines().encode(), "--filters", "1:4,x", needle="filters")


@case("pretrain", "filters_zero_count")
def _(d, env):
    return pretrain_run(d, corpus_lines().encode(), "--filters", "1:0", needle="filters")


@case("pretrain", "max_vocab_below_specials")
def _(d, env):
    return pretrain_run(d, corpus_lines().encode(), "--max-vocab", "2", needle="max-vocab|max_vocab|vocabulary size")


@case("pretrain", "negative_lr")
def _(d, env):
    return pretrain_run(d, corpus_lines().encode(), "--lr", "-0.01", needle="--lr|learning rate")


@case("pretrain", "export_layers_above_trained")
def _(d, env):
    return pretrain_run(d, corpus_lines().encode(), "--n-layers", "1", "--export-layers", "2", needle="export")


@case("pretrain", "output_holds_trained_model")
def _(d, env):
    out = d / "my_model"
    out.mkdir()
    shutil.copyfile(FIXTURE / "options.json", out / "options.json")
    shutil.copyfile(FIXTURE / "lm_weights.hdf5", out / "weights.hdf5")
    return pretrain_run(d, corpus_lines().encode(), needle="my_model", protect=[out], output="my_model")


@case("pretrain", "output_holds_other_files")
def _(d, env):
    (d / "my_folder").mkdir()
    (d / "my_folder" / "notes.txt").write_text("my notes\n", encoding="utf-8")
    return pretrain_run(d, corpus_lines().encode(), needle="my_folder", protect=[d / "my_folder"], output="my_folder")


@case("pretrain", "output_read_only")
def _(d, env):
    (d / "ro_out").mkdir()
    (d / "ro_out").chmod(0o555)
    return pretrain_run(
        d, corpus_lines().encode(), *TRAIN_30S, needle="ro_out", protect=[d / "ro_out"], output="ro_out", late_after=25
    )


@case("pretrain", "output_under_a_file")
def _(d, env):
    (d / "afile").write_text("x", encoding="utf-8")
    return pretrain_run(
        d, corpus_lines().encode(), *TRAIN_30S, needle="afile", protect=[d / "afile"], output="afile/out", late_after=25
    )


@case("pretrain", "heldout_missing")
def _(d, env):
    return pretrain_run(d, corpus_lines().encode(), "--heldout", "no_heldout.txt", needle="no_heldout.txt")


@case("pretrain", "train_missing")
def _(d, env):
    return pretrain_run(d, None, needle="train.txt")


@case("pretrain", "train_is_a_folder")
def _(d, env):
    (d / "train.txt").mkdir()
    return pretrain_run(d, None, needle="train.txt")


@case("pretrain", "options_not_json")
def _(d, env):
    (d / "size.json").write_text("{nope", encoding="utf-8")
    return pretrain_run(d, corpus_lines().encode(), "--options", "size.json", needle="size.json", sized=False)


@case("pretrain", "resume_damaged_checkpoint")
def _(d, env):
    (d / "out").mkdir()
    (d / "out" / "checkpoint.pt").write_bytes(b"PK\x03\x04 not a checkpoint")
    return pretrain_run(d, corpus_lines().encode(), "--resume", needle="checkpoint.pt", sized=False)


@case("pretrain", "card_notes_missing")
def _(d, env):
    return pretrain_run(d, corpus_lines().encode(), "--card-notes", "no_notes.md", needle="no_notes.md")


# ---- layer cache -------------------------------------------------------------------------------
CACHE_PRELUDE = """
import gc
from pathlib import Path
ref = layers_of(elmo_nlp(cache_memory_mb=0), SENTENCES)
def cached_nlp(directory='cache'):
    return elmo_nlp(cache_dir=directory, cache_memory_mb=0, cache_dtype='float32')
first = cached_nlp()
same(layers_of(first, SENTENCES), ref, 'first run with the cache')
del first
gc.collect()
shards = sorted(Path('cache').rglob('shard-*.bin'))
indexes = sorted(Path('cache').rglob('shard-*.idx'))
if not shards:
    wrong('the cache wrote no shard file')
"""


def cache_case(name: str, damage: str, expect: str = "ok", needle: str = ""):
    @case("cache", name, expect)
    def _(d, env):
        code = (
            CACHE_PRELUDE + damage + "\nsame(layers_of(cached_nlp(), SENTENCES), ref, 'second run, after the damage')\n"
        )
        return Run(code=code, needle=needle, timeout=120)


cache_case("truncated_shard", "data = shards[0].read_bytes()\nshards[0].write_bytes(data[: len(data) // 2])\n")
cache_case(
    "flipped_bits_in_shard",
    "data = bytearray(shards[0].read_bytes())\nfor i in range(64, len(data), 97):\n    data[i] ^= 0x10\nshards[0].write_bytes(bytes(data))\n",
)
cache_case("garbled_index", "indexes[0].write_bytes(b'garbage' * 10)\n", "ok|clear", "idx")
cache_case("shard_deleted", "shards[0].unlink()\n", "ok|clear", "shard")
cache_case(
    "read_only_cache_dir",
    "import os\nfor p in [Path('cache'), *Path('cache').rglob('*')]:\n    p.chmod(0o555 if p.is_dir() else 0o444)\n",
    "ok|clear",
    "cache",
)


@case("cache", "other_model_same_dir", "ok")
def _(d, env):
    code = CACHE_PRELUDE + (
        "other = elmo_nlp(Path(TINY_RANDOM) / 'options.json', Path(TINY_RANDOM) / 'weights.hdf5', cache_memory_mb=0)\n"
        "ref2 = layers_of(other, SENTENCES)\n"
        "cached2 = elmo_nlp(Path(TINY_RANDOM) / 'options.json', Path(TINY_RANDOM) / 'weights.hdf5', cache_dir='cache', cache_memory_mb=0, cache_dtype='float32')\n"
        "same(layers_of(cached2, SENTENCES), ref2, 'a second model on the same cache_dir')\n"
    )
    return Run(code=code, timeout=120)


@case("cache", "cache_dir_is_a_file")
def _(d, env):
    (d / "cachefile").write_text("x", encoding="utf-8")
    return Run(code="elmo_nlp(cache_dir='cachefile')(TEXT)\n", needle="cachefile", protect=[d / "cachefile"])


@case("cache", "cache_dir_under_a_file")
def _(d, env):
    (d / "afile").write_text("x", encoding="utf-8")
    return Run(code="elmo_nlp(cache_dir='afile/cache')(TEXT)\n", needle="afile", protect=[d / "afile"])


# ---- cache CLI -----------------------------------------------------------------------------------
def cache_argv(d: Path, env: "Env", corpus: str = "corpus.spacy", *flags: str) -> List[str]:
    options, weights = fixture_files(d)
    return ["cache", corpus, "--cache-dir", "cdir", "--options", str(options), "--weights", str(weights), *flags]


@case("cache_cli", "text_file_input")
def _(d, env):
    (d / "notes.txt").write_text("not a DocBin\n", encoding="utf-8")
    return Run(cache_argv(d, env, "notes.txt"), needle="notes.txt")


@case("cache_cli", "missing_input")
def _(d, env):
    return Run(cache_argv(d, env, "absent.spacy"), needle="absent.spacy")


@case("cache_cli", "cache_dir_is_a_file")
def _(d, env):
    shutil.copyfile(env.assets() / "corpus.spacy", d / "corpus.spacy")
    (d / "cdir").write_text("x", encoding="utf-8")
    return Run(cache_argv(d, env), needle="cdir", protect=[d / "cdir"])


@case("cache_cli", "batch_size_zero")
def _(d, env):
    shutil.copyfile(env.assets() / "corpus.spacy", d / "corpus.spacy")
    return Run(cache_argv(d, env, "corpus.spacy", "--batch-size", "0"), needle="batch-size")


@case("cache_cli", "top_layer_too_high")
def _(d, env):
    shutil.copyfile(env.assets() / "corpus.spacy", d / "corpus.spacy")
    return Run(cache_argv(d, env, "corpus.spacy", "--top-layer", "7"), needle="7|top")


@case("cache_cli", "float16_overflow_model")
def _(d, env):
    shutil.copyfile(env.assets() / "corpus.spacy", d / "corpus.spacy")
    shutil.copyfile(FIXTURE / "options.json", d / "options.json")

    def scale(f):
        # x 1e4: |w| up to 5.1e3, within what a weight file may hold (bilm/weights.MAX_ABS_WEIGHT),
        # and layer values up to 7e4, beyond float16's 65504
        for key in ("CNN_proj/W_proj", "CNN_proj/b_proj"):
            f[key][...] = f[key][()] * 1e4

    edit_weights(d / "huge.hdf5", scale)
    argv = [
        "cache",
        "corpus.spacy",
        "--cache-dir",
        "cdir",
        "--options",
        "options.json",
        "--weights",
        "huge.hdf5",
        "--dtype",
        "float16",
    ]

    def check(result: Result) -> Optional[str]:
        code = (
            "from pathlib import Path\nfrom spacy_elmo_mix import ElmoEmbedder\nfrom spacy_elmo_mix.cache import LayerCache\n"
            "e = ElmoEmbedder('options.json', 'huge.hdf5')\nc = LayerCache.for_model(e.model, 'cdir', dtype='float16', memory_bytes=0)\n"
            "for s in SENTENCES:\n    got = c.get(s.split())\n    ref = e.embed_sentence(s.split())\n"
            "    if got is None: wrong('sentence not cached')\n"
            "    if not np.isfinite(got).all(): wrong('the float16 cache holds inf for layers beyond 65504 (reported as success)')\n"
            "    if np.abs(got - ref).max() > 1e-3 * np.abs(ref).max(): wrong('cached layers differ from computed ones')\n"
        )
        verdict = env.api(code, d)
        return (
            None
            if verdict.api and verdict.api["status"] == "ok"
            else (verdict.api or {}).get("message", verdict.stderr[-200:])
        )

    return Run(argv, needle="float16", check=check)


# ---- convert ---------------------------------------------------------------------------------------
def convert_run(
    d: Path,
    data: Optional[bytes],
    *flags: str,
    name: str = "in.txt",
    output: str = "out.spacy",
    dataset: str = "conll2003",
    needle: str = "",
    check=None,
    protect=(),
) -> Run:
    if data is not None:
        (d / name).write_bytes(data)
    return Run(["convert", dataset, name, output, *flags], needle=needle, check=check, protect=list(protect))


def same_docs_check(env: Env, d: Path, reference_text: bytes) -> Callable[[Result], Optional[str]]:
    """A check: out.spacy holds the same words and entities as converting ``reference_text``."""

    def check(result: Result) -> Optional[str]:
        (d / "ref.txt").write_bytes(reference_text)
        code = (
            "from spacy.tokens import DocBin\nfrom spacy.vocab import Vocab\n"
            "from spacy_elmo_mix.workflow.convert import convert_file\nconvert_file('conll2003', 'ref.txt', 'ref.spacy')\n"
            "read = lambda p: [([t.text for t in d], [(e.start, e.end, e.label_) for e in d.ents]) for d in DocBin().from_disk(p).get_docs(Vocab())]\n"
            "got, ref = read('out.spacy'), read('ref.spacy')\n"
            "if got != ref: wrong(f'docs differ from the clean file: {got[:2]} vs {ref[:2]}')\n"
        )
        verdict = env.api(code, d)
        return (
            None
            if verdict.api and verdict.api["status"] == "ok"
            else (verdict.api or {}).get("message", verdict.stderr[-200:])
        )

    return check


@case("convert", "latin1_input", "ok|clear")
def _(d, env):
    text = CONLL.replace("German", "Zürich")
    run = convert_run(d, text.encode("latin-1"), name="latin1.txt", needle="latin1.txt")
    run.check = same_docs_check(env, d, text.encode("utf-8"))
    return run


@case("convert", "binary_input")
def _(d, env):
    return convert_run(d, random.Random(1).randbytes(5000), name="binary.txt", needle="binary.txt")


@case("convert", "bom_input", "ok")
def _(d, env):
    return convert_run(
        d,
        b"\xef\xbb\xbf" + CONLL.replace("-DOCSTART- -X- -X- O\n\n", "").encode(),
        check=same_docs_check(env, d, CONLL.encode()),
    )


@case("convert", "crlf_input", "ok")
def _(d, env):
    return convert_run(d, CONLL.replace("\n", "\r\n").encode(), check=same_docs_check(env, d, CONLL.encode()))


@case("convert", "empty_input")
def _(d, env):
    return convert_run(d, b"", name="empty.txt", needle="empty.txt")


@case("convert", "docstart_only_input")
def _(d, env):
    return convert_run(d, b"-DOCSTART- -X- -X- O\n\n", name="docstart.txt", needle="docstart.txt")


@case("convert", "max_sentences_negative")
def _(d, env):
    return convert_run(d, CONLL.encode(), "--max-sentences", "-1", needle="max-sentences|max_sentences")


@case("convert", "output_is_a_folder")
def _(d, env):
    (d / "outdir").mkdir()
    (d / "outdir" / "keep.txt").write_text("mine", encoding="utf-8")
    return convert_run(d, CONLL.encode(), output="outdir", needle="outdir", protect=[d / "outdir"])


@case("convert", "output_under_a_file")
def _(d, env):
    (d / "afile").write_text("x", encoding="utf-8")
    return convert_run(d, CONLL.encode(), output="afile/out.spacy", needle="afile", protect=[d / "afile"])


@case("convert", "wrong_column_count")
def _(d, env):
    return convert_run(d, b"EU NNP B-ORG\nrejects VBZ O\n", name="cols.txt", needle="cols.txt:1")


@case("convert", "bad_tag")
def _(d, env):
    return convert_run(d, b"EU NNP B-NP X-ORG\n", name="tags.txt", needle="X-ORG")


@case("convert", "iob2_strict_violation")
def _(d, env):
    return convert_run(d, b"EU NNP B-NP I-ORG\n", "--scheme", "iob2", name="iob.txt", needle="iob.txt:1")


@case("convert", "wnut_spaces_not_tabs")
def _(d, env):
    return convert_run(d, b"@user O\nParis B-geo-loc\n", dataset="wnut16", name="wnut.txt", needle="wnut.txt:1")


@case("convert", "conllu_four_columns")
def _(d, env):
    return convert_run(d, b"1\ta\ta\tX\n", dataset="ud_ewt", name="ud.conllu", needle="ud.conllu:1")


@case("convert", "input_missing")
def _(d, env):
    return convert_run(d, None, name="absent.txt", needle="absent.txt")


@case("convert", "folder_missing_split")
def _(d, env):
    (d / "data").mkdir()
    (d / "data" / "train.txt").write_text(CONLL, encoding="utf-8")
    return Run(["convert", "conll2003", "data", "corpus"], needle="valid|dev|test")


# ---- damaged saved pipelines ------------------------------------------------------------------------
LOAD_AND_COMPARE = (
    "import spacy\nnlp = spacy.load('pipeline')\nref = np.load(REF)\n"
    "same([nlp(TEXT)._.elmo_layers], [ref], 'the loaded pipeline vs the saved one')\n"
)


def pipeline_case(name: str, damage: Callable[[Path], None], needle: str, expect: str = "clear"):
    @case("pipeline", name, expect)
    def _(d, env):
        shutil.copytree(env.assets() / "pipeline", d / "pipeline")
        damage(d / "pipeline" / "elmo")
        return Run(code=f"REF = {str(env.assets() / 'ref.npy')!r}\n" + LOAD_AND_COMPARE, needle=needle)


def _flip(offsets: Callable[[int], Sequence[int]]) -> Callable[[Path], None]:
    def damage(elmo: Path) -> None:
        data = bytearray((elmo / "model").read_bytes())
        for i in offsets(len(data)):
            data[i] ^= 0xFF
        (elmo / "model").write_bytes(bytes(data))

    return damage


pipeline_case("round_trip", lambda elmo: None, "", "ok")
pipeline_case("model_one_float_flipped", _flip(lambda n: range(n // 2, n // 2 + 4)), "model")
pipeline_case("model_bytes_flipped_spread", _flip(lambda n: range(n // 4, n, n // 7)), "model")
pipeline_case(
    "model_truncated", lambda elmo: (elmo / "model").write_bytes((elmo / "model").read_bytes()[:1000]), "model"
)
pipeline_case("model_missing", lambda elmo: (elmo / "model").unlink(), "model")
pipeline_case("model_empty", lambda elmo: (elmo / "model").write_bytes(b""), "model")
pipeline_case(
    "model_from_other_data", lambda elmo: (elmo / "model").write_bytes(random.Random(2).randbytes(4096)), "model"
)
pipeline_case("cfg_garbled", lambda elmo: (elmo / "cfg").write_text("{not json", encoding="utf-8"), "cfg")
pipeline_case("scheme_missing", lambda elmo: (elmo / "scheme").unlink(), "scheme")
pipeline_case("scheme_garbled", lambda elmo: (elmo / "scheme").write_bytes(b"\x93garbage"), "scheme")
pipeline_case("elmo_folder_missing", lambda elmo: shutil.rmtree(elmo), "elmo")


# ---- compare --------------------------------------------------------------------------------------------
def metrics_folder(d: Path, content: str, seed: int = 1) -> Path:
    run = d / "results" / "runs" / "conll2003" / "layer1" / f"seed{seed}"
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(content, encoding="utf-8")
    return run


def good_metrics(seed: int) -> str:
    return json.dumps(
        {"dataset": "conll2003", "scheme": "layer1", "seed": seed, "score": 0.5 + seed / 100, "metric": "ents_f"}
    )


def names_in_output(*parts: str) -> Callable[[Result], Optional[str]]:
    def check(result: Result) -> Optional[str]:
        text = result.stdout + result.stderr
        return None if all(p in text for p in parts) else f"output does not mention {parts}"

    return check


@case("compare", "results_folder_missing")
def _(d, env):
    return Run(["compare", "--results", "no_results"], needle="no_results")


@case("compare", "results_is_a_file")
def _(d, env):
    (d / "res_file").write_text("x", encoding="utf-8")
    return Run(["compare", "--results", "res_file"], needle="res_file", protect=[d / "res_file"])


@case("compare", "garbled_metrics_json", "ok|clear")
def _(d, env):
    metrics_folder(d, "{not json", seed=1)
    metrics_folder(d, good_metrics(2), seed=2)
    return Run(["compare", "--results", "results"], needle="seed1", check=names_in_output("seed1"))


@case("compare", "metrics_score_not_a_number", "ok|clear")
def _(d, env):
    metrics_folder(d, good_metrics(1).replace("0.51", '"high"'), seed=1)
    metrics_folder(d, good_metrics(2), seed=2)
    return Run(["compare", "--results", "results"], needle="score", check=names_in_output("seed1", "score"))


@case("compare", "metrics_score_percent", "ok|clear")
def _(d, env):
    metrics_folder(d, good_metrics(1).replace("0.51", "91.2"), seed=1)
    metrics_folder(d, good_metrics(2), seed=2)
    return Run(["compare", "--results", "results"], needle="score", check=names_in_output("seed1", "score"))


@case("compare", "alpha_out_of_range")
def _(d, env):
    metrics_folder(d, good_metrics(1))
    return Run(["compare", "--results", "results", "--alpha", "2"], needle="alpha")


@case("compare", "seed_with_no_runs")
def _(d, env):
    metrics_folder(d, good_metrics(1))
    return Run(["compare", "--results", "results", "--seeds", "99"], needle="seeds found: 1")


@case("compare", "scheme_misspelt")
def _(d, env):
    metrics_folder(d, good_metrics(1))
    return Run(["compare", "--results", "results", "--schemes", "layr1"], needle="layr1")


@case("compare", "dataset_misspelt")
def _(d, env):
    metrics_folder(d, good_metrics(1))
    return Run(["compare", "--results", "results", "--datasets", "conll2030"], needle="conll2030")


# ---- grid / run -----------------------------------------------------------------------------------------
def grid_argv(dataset: str, scheme: str, *extra: str, template: str = "true {output}") -> List[str]:
    """``grid`` over one dataset x scheme x seed 1 with a job that does nothing, plus ``extra``."""
    grid = ["grid", "--seeds", "1", "--results", "results", "--no-progress"]
    return grid + ["--datasets", dataset, "--schemes", scheme, "--command-template", template, *extra]


@case("grid_run", "run_unknown_scheme")
def _(d, env):
    return Run(
        ["run", "--dataset", "conll2003", "--scheme", "layer9", "--seed", "1", "--output", "out"], needle="layer9"
    )


@case("grid_run", "run_unknown_dataset")
def _(d, env):
    return Run(
        ["run", "--dataset", "conll2099", "--scheme", "layer1", "--seed", "1", "--output", "out"], needle="conll2099"
    )


@case("grid_run", "run_corpus_missing")
def _(d, env):
    return Run(
        [
            "run",
            "--dataset",
            "conll2003",
            "--scheme",
            "layer1",
            "--seed",
            "1",
            "--output",
            "out",
            "--corpus",
            "no_corpus",
        ],
        needle="no_corpus",
    )


@case("grid_run", "run_set_not_json")
def _(d, env):
    return Run(
        [
            "run",
            "--dataset",
            "conll2003",
            "--scheme",
            "layer1",
            "--seed",
            "1",
            "--output",
            "out",
            "--set",
            "training.seed=abc",
        ],
        needle="training.seed",
    )


def run_with_override(d: Path, env, override: str) -> Run:
    """``run`` on a small corpus (the shared assets' sentences as train, dev and test) with ``--set``."""
    corpus = d / "corpus" / "conll2003"
    corpus.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        shutil.copyfile(env.assets() / "corpus.spacy", corpus / f"{split}.spacy")
    argv = ["run", "--dataset", "conll2003", "--scheme", "layer1", "--seed", "1", "--output", "out"]
    return Run(argv + ["--corpus", "corpus", "--set", override], needle=override.partition("=")[0], late_after=60)


@case("grid_run", "run_set_unknown_key")
def _(d, env):
    return run_with_override(d, env, "training.foo=1")  # spaCy itself accepts and ignores it


@case("grid_run", "run_set_a_key_the_run_sets")
def _(d, env):
    return run_with_override(d, env, "system.seed=7")  # metrics.json would say seed 1


@case("grid_run", "grid_unknown_scheme")
def _(d, env):
    return Run(
        grid_argv("conll2003", "layer9"),
        needle="layer9",
    )


@case("grid_run", "grid_unknown_dataset")
def _(d, env):
    return Run(
        grid_argv("conll2099", "layer1"),
        needle="conll2099",
    )


@case("grid_run", "grid_unknown_placeholder")
def _(d, env):
    return Run(
        grid_argv("conll2003", "layer1", template="true {outptu}"),
        needle="outptu",
    )


@case("grid_run", "grid_negative_workers")
def _(d, env):
    return Run(
        grid_argv("conll2003", "layer1", "--max-workers", "-1"),
        needle="max-workers|max_workers",
    )


@case("grid_run", "grid_dataset_id_leaves_the_results_folder")
def _(d, env):
    return Run(
        grid_argv("../../outside", "layer1"),
        needle="../../outside",
    )


@case("grid_run", "grid_empty_scheme_id")
def _(d, env):
    return Run(
        grid_argv("conll2003", ""),
        needle="scheme id ''",
    )


# ================================================================================== main
def print_report(verdicts: List[Verdict]) -> None:
    from wasabi import msg

    rows = [(v.group, v.name, v.expect, v.outcome, f"{v.seconds:.1f}", v.reason[:110]) for v in verdicts]
    msg.table(rows, header=("group", "case", "expected", "outcome", "s", "detail"), divider=True)
    totals = {o: sum(v.outcome == o for v in verdicts) for o in OUTCOMES}
    msg.table(
        [(o, n) for o, n in totals.items()] + [("total", len(verdicts))], header=("outcome", "cases"), divider=True
    )


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only", nargs="+", metavar="GROUP", choices=sorted({c.group for c in CASES}), help="run only these groups"
    )
    parser.add_argument("--case", help="run only cases whose name contains this")
    parser.add_argument("--json", type=Path, help="write the per-case results to this JSON file")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case (default 60; network cases: 15)")
    args = parser.parse_args(argv)
    if not FIXTURE.exists():
        print(f"the fixture model {FIXTURE} is absent: nothing to run", file=sys.stderr)
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # clean up the temp folder when stopped
    cases = [c for c in CASES if (not args.only or c.group in args.only) and (not args.case or args.case in c.name)]
    verdicts = []
    with tempfile.TemporaryDirectory(prefix="battery-") as root:
        env = Env(Path(root), args.timeout)
        for i, c in enumerate(cases, 1):
            verdict = run_case(c, env)
            print(
                f"[{i}/{len(cases)}] {c.group}/{c.name}: {verdict.outcome} ({verdict.seconds:.1f} s) {verdict.reason[:100]}",
                flush=True,
            )
            verdicts.append(verdict)
        _make_writable(Path(root))
    print_report(verdicts)
    if args.json:
        args.json.write_text(json.dumps([v.__dict__ for v in verdicts], indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
