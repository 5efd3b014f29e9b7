"""Importing the package bounds oneDNN's primitive cache (``spacy_elmo_mix.ONEDNN_PRIMITIVES``), so
a BiLSTM that meets a new shape with each batch does not grow the process; a user's value wins."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import spacy_elmo_mix

REPO = Path(__file__).resolve().parents[1]
# An LSTM run over 650 random (batch, length) shapes after the package is imported: the growth of
# anonymous memory over the last 600 in MiB. Bounded: ~37; torch's default (1,024 primitives): ~190.
PROBE = """
import random
import spacy_elmo_mix
import torch
torch.set_num_threads(1)
def anonymous_mib():
    with open("/proc/self/smaps_rollup") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Anonymous")) / 1024
lstm = torch.nn.LSTM(64, 32, batch_first=True, bidirectional=True)
random.seed(0)
for i in range(650):
    if i == 50:
        start = anonymous_mib()
    lstm(torch.zeros(random.randint(1, 32), random.randint(1, 60), 64, requires_grad=True))[0].sum().backward()
print(anonymous_mib() - start)
"""


def _run(code: str, capacity=None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_PRIMITIVE_CACHE_CAPACITY"}
    if capacity is not None:
        env["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = capacity
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_import_sets_the_bound_unless_set():
    code = "import os, spacy_elmo_mix; print(os.environ['ONEDNN_PRIMITIVE_CACHE_CAPACITY'])"
    assert _run(code) == str(spacy_elmo_mix.ONEDNN_PRIMITIVES)
    assert _run(code, capacity="8") == "8"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps_rollup")
def test_bounded_cache_keeps_an_lstm_of_many_shapes_small():
    bounded = float(_run(PROBE))
    assert bounded < 80
    assert float(_run(PROBE, capacity="1024")) > 2 * bounded + 20  # the probe sees the growth it guards against
