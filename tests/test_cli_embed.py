"""``python -m spacy_elmo_mix embed``: output file handling and precision option."""
from __future__ import annotations

import numpy as np
import pytest

from spacy_elmo_mix.__main__ import main


def _embed(tiny_model_files, *extra):
    options, weights = tiny_model_files
    return main(["embed", "--options", str(options), "--weights", str(weights), "The cat sat .", *extra])


def test_output_written_completely(tiny_model_files, tmp_path, capsys):
    out = tmp_path / "layers.npz"
    assert _embed(tiny_model_files, "--output", str(out), "--compute-dtype", "auto") == 0
    with np.load(out) as data:
        assert data["sentence_0"].shape == (3, 4, 32)
    assert [p.name for p in tmp_path.iterdir()] == ["layers.npz"]


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda d: (d / "plain.txt").write_text("x") and d / "plain.txt" / "layers.npz", "is a file, not a folder"),
        (lambda d: (d / "old.npz").write_bytes(b"keep") and d / "old.npz", "exists; pass --force"),
        (lambda d: d, "is a folder"),
    ],
    ids=["under-a-file", "existing", "folder"],
)
def test_bad_output_is_one_line_and_keeps_files(tiny_model_files, tmp_path, capsys, make, message):
    out = make(tmp_path)
    assert _embed(tiny_model_files, "--output", str(out)) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1 and str(out) in err
    if (tmp_path / "old.npz").exists():
        assert (tmp_path / "old.npz").read_bytes() == b"keep"


def test_force_replaces(tiny_model_files, tmp_path):
    out = tmp_path / "old.npz"
    out.write_bytes(b"old")
    assert _embed(tiny_model_files, "--output", str(out), "--force") == 0
    with np.load(out) as data:
        assert list(data) == ["sentence_0"]


@pytest.mark.parametrize("top_layer", ["7", "-1"])
def test_unavailable_top_layer_is_one_line(tiny_model_files, capsys, top_layer):
    assert _embed(tiny_model_files, "--top-layer", top_layer) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"top_layer={top_layer}" in err and "Traceback" not in err


def test_debug_shows_the_error_and_tells_commands(tiny_model_files, monkeypatch):
    """``--debug`` lets the error propagate and sets the variable that commands which print their
    own errors (distributed pretraining) read."""
    from spacy_elmo_mix.errors import ElmoInputError, debug_requested

    monkeypatch.setenv("SPACY_ELMO_MIX_DEBUG", "0")  # restored after the test
    assert not debug_requested()
    with pytest.raises(ElmoInputError, match="top_layer=7"):
        _embed(tiny_model_files, "--top-layer", "7", "--debug")
    assert debug_requested()
