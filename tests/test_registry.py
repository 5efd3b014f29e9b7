"""Every name this package registers (setup.cfg entry points) resolves in spaCy's registries,
and importing the plugin stays light."""

from __future__ import annotations

import configparser
import subprocess
import sys

import pytest
from spacy.util import registry

from elmo_testing import REPO


def _entry_points():
    parser = configparser.ConfigParser()
    parser.read(REPO / "setup.cfg")
    for group, body in parser["options.entry_points"].items():
        for line in filter(None, (line.strip() for line in body.splitlines())):
            name, target = (part.strip() for part in line.split("=", 1))
            yield group, name, target


ENTRY_POINTS = list(_entry_points())


def test_entry_points_are_declared():
    groups = {group for group, _, _ in ENTRY_POINTS}
    assert {"spacy_factories", "spacy_architectures", "spacy_layers", "spacy_loggers", "spacy_cli"} <= groups


VERSIONED = [(name, target) for group, name, target in ENTRY_POINTS if group not in ("spacy_factories", "spacy_cli")]


@pytest.mark.parametrize("name,target", VERSIONED, ids=[n for n, _ in VERSIONED])
def test_registered_functions_are_versioned_builders(name, target):
    """``spacy-elmo-mix.Name.vN`` is built by ``build_*_vN``: the version in both names."""
    version = name.rsplit(".", 1)[1]
    assert name.startswith("spacy-elmo-mix.") and version[:1] == "v" and version[1:].isdigit()
    function = target.split(":")[1]
    assert function.startswith("build_") and function.endswith(f"_{version}"), (name, function)


@pytest.mark.parametrize("group,name,target", ENTRY_POINTS, ids=[n for _, n, _ in ENTRY_POINTS])
def test_registered_name_resolves(group, name, target):
    import importlib

    module, attr = target.split(":")
    expected = getattr(importlib.import_module(module), attr)
    if group == "spacy_factories":
        from spacy.language import Language

        assert Language.get_factory_meta(name).factory == name
        assert callable(expected)
        return
    if group == "spacy_cli":  # a command of spaCy's command line: `python -m spacy elmo`
        from spacy.cli import app

        assert registry.cli.get_all()[name] is expected
        assert [c.callback for c in app.registered_commands if c.name == name] == [expected]
        return
    assert registry.get(group[len("spacy_") :], name) is expected
    assert name.startswith("spacy-elmo-mix.")
    assert name.rsplit(".", 1)[-1].startswith("v")


def test_entry_point_modules_do_not_import_h5py_or_our_biLM():
    code = (
        "import sys, spacy; nlp = spacy.blank('en'); "
        "import spacy_elmo_mix.architectures, spacy_elmo_mix.training_logger, spacy_elmo_mix.cli.spacy_command; "
        "heavy = [m for m in ('spacy_elmo_mix.bilm.modules', 'spacy_elmo_mix.bilm.weights', 'spacy_elmo_mix.__main__', 'cached_path', 'matplotlib', 'scipy') if m in sys.modules]; "
        "print(heavy)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
