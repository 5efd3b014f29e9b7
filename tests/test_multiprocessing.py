"""``nlp.pipe(n_process=2)`` on an ELMo pipeline: it finishes with torch's default threads (a
forked worker gets one thread, ``spacy_elmo_mix._one_thread_after_fork``) and gives what one
process on one thread gives, to the bit."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow  # runs subprocesses and workflows: make test-fast leaves it out

SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import spacy
    import torch
    import spacy_elmo_mix  # noqa: F401 (registers the factories and the fork handler)

    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": {"options_file": sys.argv[1], "weight_file": sys.argv[2]}})
    nlp.initialize()
    texts = [f"Sentence {i} is about Paris and London ." for i in range(24)]
    # The reference on one thread, as each worker runs (another thread count sums in another order)
    torch.set_num_threads(1)
    one = list(nlp.pipe(texts, batch_size=4))
    torch.set_num_threads(2)  # a thread pool that a forked child does not have
    nlp("The pool starts here .")
    two = list(nlp.pipe(texts, batch_size=4, n_process=2))
    assert [d.text for d in two] == texts
    for a, b in zip(one, two):
        assert np.array_equal(a.tensor, b.tensor) and a.tensor.size > 0
        assert np.array_equal(a._.elmo_layers, b._.elmo_layers)
    assert torch.get_num_threads() == 2  # the parent keeps its threads
    print("same")
    """
)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_pipe_with_two_processes_finishes_and_matches_one(tiny_model_files, tmp_path):
    options, weights = tiny_model_files
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    script = tmp_path / "pipe.py"
    script.write_text(SCRIPT, encoding="utf-8")
    try:
        done = subprocess.run(
            [sys.executable, str(script), str(options), str(weights)],
            env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("nlp.pipe(n_process=2) did not finish in 120 s (a forked worker waiting for threads)")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("same")
