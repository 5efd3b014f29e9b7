"""The command line's conventions: every ``--help`` shows the defaults (once), ``demo --help`` is a
usage text, and ``python -m spacy elmo ...`` is the same command line as ``python -m spacy_elmo_mix``."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from elmo_testing import REPO
from spacy_elmo_mix.__main__ import COMMANDS, main
from spacy_elmo_mix.cli import HelpFormatter, description


def command_help(name: str, monkeypatch, capsys):
    """(status, printed help, the parser that printed it) of ``python -m spacy_elmo_mix NAME --help``."""
    printed = []
    print_help = argparse.ArgumentParser.print_help

    def recording(self, file=None):
        printed.append(self)
        print_help(self, file)

    monkeypatch.setattr(argparse.ArgumentParser, "print_help", recording)
    try:
        status = main([name, "--help"])
    except SystemExit as exc:
        status = exc.code
    assert len(printed) == 1
    return status, capsys.readouterr().out, printed[0]


def has_default(action: argparse.Action) -> bool:
    default = action.default
    return (
        bool(action.option_strings)
        and action.help is not None
        and not (default is None or default is False or default is argparse.SUPPRESS or default == [])
    )


@pytest.mark.parametrize("name", list(COMMANDS))
def test_help_shows_every_default_once(name, monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)  # demo --help must not create a project folder either
    status, text, parser = command_help(name, monkeypatch, capsys)
    assert status == 0 and text.startswith(f"usage: python -m spacy_elmo_mix {name} ")
    assert not list(tmp_path.iterdir())
    for noise in ("(default: None)", "(default: False)", "(default: [])", "``", ":func:", "::\n"):
        assert noise not in text, noise
    formatter = parser._get_formatter()
    for action in parser._actions:
        expanded = formatter._expand_help(action) if action.help else ""
        assert expanded.count("default") <= 1, (action.option_strings, expanded)  # no duplicated default
        if has_default(action):
            assert f"default: {action.default}" in expanded, (action.option_strings, expanded)


@pytest.mark.parametrize(
    "name, option, shown",
    [
        ("cache", "--dtype", "float32"),
        ("cache", "--batch-size", "64"),
        ("run", "--cache-dtype", "float16"),
        ("run", "--gpu-id", "-1"),
        ("grid", "--results", "results"),
        ("compare", "--alpha", "0.01"),
        ("convert", "--scheme", "auto"),
        ("embed", "--compute-dtype", "float32"),
        ("pretrain", "--lstm-dim", "512"),
        ("pretrain", "--lr", "0.0015"),
    ],
)
def test_help_names_the_default(name, option, shown, monkeypatch, capsys):
    _, text, _ = command_help(name, monkeypatch, capsys)
    entry = re.search(rf"^  {re.escape(option)}\b.*?(?=^  -|\Z)", text, re.MULTILINE | re.DOTALL).group()
    assert f"(default: {shown}" in " ".join(entry.split())


def test_demo_help_is_a_usage_text(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    _, text, _ = command_help("demo", monkeypatch, capsys)
    usage, body = text.split("\n\n", 1)
    assert usage == "usage: python -m spacy_elmo_mix demo [-h] [--project-dir DIR] [--vars.NAME VALUE ...]"
    assert body.startswith("The demo workflow.") and "--project-dir DIR" in body and "--vars.NAME VALUE" in body


def test_formatter_adds_defaults_that_are_values_only():
    parser = argparse.ArgumentParser(
        prog="p", description="line one\n    kept as written", formatter_class=HelpFormatter
    )
    parser.add_argument("path", help="a positional")
    parser.add_argument("--none", help="unset")
    parser.add_argument("--flag", action="store_true", help="a flag")
    parser.add_argument("--many", nargs="*", default=[], help="a list")
    parser.add_argument("--zero", type=int, default=0, help="zero is a value")
    parser.add_argument("--own", default="x", help="named (default: %(default)s, because)")
    text = parser.format_help()
    assert "line one\n    kept as written" in text
    assert text.count("(default:") == 2
    assert "zero is a value (default: 0)" in text and "named (default: x, because)" in text


def test_description_drops_the_restructuredtext_marks():
    doc = "``python -m spacy_elmo_mix x A B``: do ``this``.\n\nSee :func:`~m.f`. Example::\n\n    run it\n"
    assert description(doc) == "Do this.\n\nSee m.f. Example:\n\n    run it"


# python -m spacy elmo: spaCy's command line with the package's spacy_cli entry point


def spacy_cli(*args: str) -> subprocess.CompletedProcess:
    if not any(ep.name == "elmo" for ep in entry_points(group="spacy_cli")):
        pytest.skip("the spacy_cli entry point is not installed: pip install --no-deps -e .")
    env = {**os.environ, "SPACY_ELMO_MIX_DEBUG": ""}
    return subprocess.run(
        [sys.executable, "-m", "spacy", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=300,
        check=False,
    )


def test_spacy_lists_the_elmo_command():
    result = spacy_cli("--help")
    assert result.returncode == 0 and any(line.split()[:1] == ["elmo"] for line in result.stdout.splitlines())


def test_spacy_elmo_help_lists_the_commands():
    result = spacy_cli("elmo", "--help")
    assert result.returncode == 0
    assert all(f"\n  {name} " in result.stdout for name in COMMANDS)


def test_spacy_elmo_forwards_a_command_help():
    result = spacy_cli("elmo", "convert", "--help")
    # the usage line names the command line the user typed
    assert result.returncode == 0 and result.stdout.startswith("usage: python -m spacy elmo convert ")
    assert "(default: auto)" in result.stdout


def test_spacy_elmo_bad_input_is_one_line(tmp_path):
    result = spacy_cli("elmo", "convert", "conll2003", str(tmp_path / "missing"), str(tmp_path / "out"))
    assert result.returncode == 1
    assert result.stderr.splitlines() == [f"error: {tmp_path / 'missing'}: no such file"]


def test_spacy_elmo_keeps_the_end_of_options(tmp_path):
    """``--`` reaches the command (click drops it from what it parsed): ``--foo`` is a sentence, so
    the missing options file is the error, not an unknown option."""
    missing = str(tmp_path / "options.json")
    result = spacy_cli("elmo", "embed", "--options", missing, "--weights", missing, "--no-progress", "--", "--foo")
    assert result.returncode == 1 and result.stderr.splitlines() == [f"error: ELMo options file not found: {missing}"]
