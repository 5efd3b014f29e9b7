# Two entry points, each creating its own virtual environment (.venv):
#   make demo   set up and run the main job
#   make test   set up and run the test suite
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup demo test test-fast clean

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

# The numerical tests run a second time on the AVX2 kernels (torch, oneDNN, MKL), so a machine with
# AVX-512 also catches what an AVX2-only CPU computes (other summation orders, other last bits).
# They also run once on each other kernel set the machine has (spacy_elmo_mix/bilm/kernels.py: MKL
# or oneDNN packed, torch's plain products, numpy's OpenBLAS), so every set meets the same bounds.
NUMERIC_TESTS := tests/test_bilm_reference.py tests/test_bilm_batching.py tests/test_bilm_bfloat16.py tests/test_bilm_gradients.py tests/test_bilm_token_cache.py tests/test_bilstm.py tests/test_crf.py
NARROW_ISA := ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2
OTHER_KERNELS := from spacy_elmo_mix.bilm.kernels import KERNELS, default_kernels, unavailable_reason as why; print(*(k for k in KERNELS if k != default_kernels() and not why(k)))

test: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(PY) -m pytest -q -p no:cacheprovider tests
	$(NARROW_ISA) $(PY) -m pytest -q -p no:cacheprovider $(NUMERIC_TESTS)
	for kernels in $$($(PY) -c "$(OTHER_KERNELS)"); do echo "kernel set $$kernels:"; SPACY_ELMO_MIX_KERNELS=$$kernels $(PY) -m pytest -q -p no:cacheprovider $(NUMERIC_TESTS) || exit 1; done

# Lint and the tests not marked slow (no workflows, subprocess pipelines or doc examples): a
# minute or two while working; `make test` is what CI runs.
test-fast: setup
	$(PY) -m ruff check .
	$(PY) -m pytest -q -p no:cacheprovider -m "not slow" tests

clean:
	rm -rf $(VENV) *.egg-info
