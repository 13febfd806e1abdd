# Two commands on a fresh clone: `make appendix` and `make test` (see README). Both set up .venv first.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PARAMS ?= params/default.yaml
# torch is pinned in pyproject.toml; it is installed first because natten's setup.py imports it to build.
TORCH  := $(shell grep -o '"torch==[^"]*"' pyproject.toml | tr -d '"')
KERNEL := $(PY) -m ipykernel install --sys-prefix --name weftlib --display-name "weftlib (RFD 1129)"

.PHONY: appendix test lab clean-outputs

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip setuptools wheel
	$(PY) -m pip install --quiet "$(TORCH)"
	$(PY) -m pip install --quiet --no-build-isolation -e ".[dev]"
	$(KERNEL)
	touch $@

$(VENV)/.installed-lab: $(VENV)/.installed
	$(PY) -m pip install --quiet --no-build-isolation -e ".[lab,dev]"
	touch $@

appendix: $(VENV)/.installed
	$(PY) -m weftlib run --params $(PARAMS)

test: $(VENV)/.installed
	$(PY) -m pytest

lab: $(VENV)/.installed-lab
	$(VENV)/bin/jupyter lab notebooks/

clean-outputs:
	find outputs -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf {} +
