"""``python -m spacy_elmo_mix embed``: output file handling, progress bar and precision option."""

from __future__ import annotations

import io

import numpy as np
import pytest

from spacy_elmo_mix.__main__ import main


def _embed(tiny_model_files, *extra):
    options, weights = tiny_model_files
    return main(["embed", "--options", str(options), "--weights", str(weights), "The cat sat .", *extra])


FILE = ["The cat sat .", "Hello world", "A third , longer sentence about ELMo ."] * 4


def _embed_file(tiny_model_files, monkeypatch, *extra):
    """Run ``embed`` on ``FILE`` read from stdin (as ``embed < file``)."""
    options, weights = tiny_model_files
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(FILE) + "\n"))
    return main(["embed", "--options", str(options), "--weights", str(weights), *extra])


def test_output_written_completely(tiny_model_files, tmp_path, capsys):
    out = tmp_path / "layers.npz"
    assert _embed(tiny_model_files, "--output", str(out), "--compute-dtype", "auto") == 0
    with np.load(out) as data:
        assert data["sentence_0"].shape == (3, 4, 32)
    assert [p.name for p in tmp_path.iterdir()] == ["layers.npz"]


def test_file_with_output_prints_one_line_and_shows_progress(tiny_model_files, tmp_path, capsys, monkeypatch):
    out = tmp_path / "layers.npz"
    assert _embed_file(tiny_model_files, monkeypatch, "--output", str(out)) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        f"wrote {out}: {len(FILE)} sentences; model: {tiny_model_files[0]}  (3 layers of 32 dims)"
    ]
    assert "ELMo: 100%" in captured.err and f"{len(FILE)}/{len(FILE)}" in captured.err
    with np.load(out) as data:
        assert sorted(data) == sorted(f"sentence_{i}" for i in range(len(FILE)))
        assert [data[f"sentence_{i}"].shape for i in range(len(FILE))] == [(3, len(s.split()), 32) for s in FILE]


def test_file_to_stdout_prints_a_line_per_sentence(tiny_model_files, capsys, monkeypatch):
    assert _embed_file(tiny_model_files, monkeypatch, "--no-progress", "--top-layer", "1") == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0] == f"model: {tiny_model_files[0]}  (2 layers of 32 dims)" and len(lines) == 1 + len(FILE)
    assert all(
        line.startswith(f"{len(s.split()):3d} tokens  {s!r}") and " L1=" in line and " L2=" not in line
        for line, s in zip(lines[1:], FILE)
    )
    assert captured.err == ""  # --no-progress: no bar


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
