"""What the commands need ships with the package: configs, the data set list and project.yml."""

from __future__ import annotations

import configparser
import importlib.resources

from elmo_testing import REPO

NEEDED = [
    "configs/ner.cfg",
    "configs/ner_baseline.cfg",
    "configs/ner_elmo_hash.cfg",
    "configs/tagger.cfg",
    "configs/tagger_elmo_hash.cfg",
    "configs/tagger_baseline.cfg",
    "configs/datasets.json",
    "project.yml",
]


def test_package_holds_configs_data_sets_and_project():
    package = importlib.resources.files("spacy_elmo_mix")
    for name in NEEDED:
        assert package.joinpath(name).is_file(), name
    from spacy_elmo_mix.workflow.run import CONFIG_DIR

    assert CONFIG_DIR == package.joinpath("configs")  # run resolves configs inside the package


def test_setup_cfg_lists_them_as_package_data():
    setup = configparser.ConfigParser()
    setup.read(REPO / "setup.cfg")
    patterns = [p.strip() for p in setup["options.package_data"]["spacy_elmo_mix"].split(",")]
    for pattern in ("configs/*.cfg", "configs/*.json", "project.yml"):
        assert pattern in patterns
    assert (REPO / "configs").resolve() == REPO / "spacy_elmo_mix" / "configs"  # one copy: the project links to it
    assert (REPO / "project.yml").resolve() == REPO / "spacy_elmo_mix" / "project.yml"
