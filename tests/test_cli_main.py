"""``python -m spacy_elmo_mix``: output cut short by a reader that goes away ends quietly."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

from elmo_testing import REPO


def run_into_closed_pipe(*args: str) -> subprocess.CompletedProcess:
    """Run the command line with its stdout a pipe whose reading end is already closed (the state
    ``| head`` leaves once it has its lines): every write to it fails with EPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "spacy_elmo_mix", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            timeout=300,
            check=False,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize("args, status", [(["--help"], 1), (["embed", "--help"], 0)], ids=["usage", "command-help"])
def test_help_into_a_closed_pipe_is_quiet(args, status):
    """Status 1 where the output was cut short (as the Python documentation recommends); argparse's
    help ignores a failed write itself and exits 0."""
    result = run_into_closed_pipe(*args)
    assert (result.stderr, result.returncode) == ("", status)


def test_embed_piped_into_head_ends_without_a_traceback(tiny_model_files):
    """``embed`` of a file whose lines (about 300 kB) outgrow the pipe's buffer, into ``head -1``."""
    options, weights = map(shlex.quote, map(str, tiny_model_files))
    command = (
        f"yes 'The cat sat on the mat .' | head -2000 | {shlex.quote(sys.executable)} -m spacy_elmo_mix embed "
        f"--options {options} --weights {weights} --no-progress | head -1"
    )
    result = subprocess.run(command, shell=True, capture_output=True, text=True, cwd=REPO, timeout=300, check=False)
    assert result.stdout.startswith("model: ") and result.stdout.count("\n") == 1
    assert result.stderr == ""  # no BrokenPipeError traceback, no "Exception ignored" at exit
