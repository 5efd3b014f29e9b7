# Two entry points, each creating its own virtual environment (.venv):
#   make demo   set up and run the main job
#   make test   set up and run the test suite
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup demo test clean

$(VENV)/.installed: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first: 2.13.0 is a local CPU wheel on these machines; the package's range then installs nothing more.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(PY) -m spacy_elmo_mix demo

test: setup
	$(PY) -m pytest -q -p no:cacheprovider tests

clean:
	rm -rf $(VENV) *.egg-info
