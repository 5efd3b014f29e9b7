"""Where a run ran (``workflow.environment``): the checkout's commit, marked dirty when the package's
files differ from it, and None outside a checkout."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from spacy_elmo_mix.workflow.environment import git_checkout

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git command")


def _git(repo, *args):
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def test_git_checkout_names_the_commit_and_marks_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # no checkout above tmp_path counts
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = tmp_path / "repo"
    package = repo / "pkg"
    package.mkdir(parents=True)
    (package / "code.py").write_text("x = 1\n")
    (repo / "other.txt").write_text("a\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    assert git_checkout(outside) is None
    assert git_checkout(package) == commit
    (repo / "other.txt").write_text("b\n")  # a change outside the package's directory
    assert git_checkout(package) == commit
    (package / "code.py").write_text("x = 2\n")
    assert git_checkout(package) == commit + "+dirty"
