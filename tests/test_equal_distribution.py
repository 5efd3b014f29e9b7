"""Issue 42's equal-distribution rerun, as committed: the UD POS cells rerun with the faster
training code (``results/speed_rerun``) have the committed runs' identities and do not move
(Welch's two-sided t-test, p >= 0.05 in every cell, at least 5 seeds each)."""

from __future__ import annotations

import sys

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
from equal_distribution import ALPHA, compare, render  # noqa: E402

COMMITTED, RERUN = REPO / "results" / "runs" / "ud_ewt", REPO / "results" / "speed_rerun" / "runs" / "ud_ewt"


@pytest.fixture(scope="module")
def rows():
    if not RERUN.is_dir():
        pytest.skip(f"{RERUN} is absent")
    return compare(COMMITTED, RERUN)


def test_every_cell_is_rerun_at_five_seeds_or_more(rows):
    assert {r["cell"] for r in rows} == {p.name for p in COMMITTED.iterdir() if p.is_dir()}
    assert all(len(r["rerun"]) >= 5 and r["shared_seeds"] == len(r["rerun"]) for r in rows)


def test_no_cell_moved(rows):
    assert all(r["p_value"] >= ALPHA for r in rows), [(r["cell"], r["p_value"]) for r in rows]


def test_the_committed_table_is_what_the_runs_give(rows):
    assert (REPO / "results" / "speed_rerun" / "README.md").read_text(encoding="utf-8") == render("ud_ewt", rows)


def test_a_changed_identity_is_refused(tmp_path):
    """The comparison is only meaningful for runs of the same inputs: it refuses others."""
    import json
    import shutil

    for which in ("old", "new"):
        shutil.copytree(COMMITTED / "layer1" / "seed1", tmp_path / which / "layer1" / "seed1")
    path = tmp_path / "new" / "layer1" / "seed1" / "metrics.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["identity"]["files"] = {**data["identity"]["files"], "corpus/ud_ewt/train.spacy": "0" * 64}
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match="another identity"):
        compare(tmp_path / "old", tmp_path / "new")
