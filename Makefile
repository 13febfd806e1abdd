# On a fresh clone: `make appendix` (the full-size appendix the RFD cites) and `make test` (see README);
# `make check` is the developer's inner loop (everything of `make test` that runs no notebook and no export).
# Every target sets up .venv first; that step also points git's notebook filter at scripts/nbstrip.py.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
RUN    ?= outputs/appendix
SETUP  := $(VENV)/.installed $(VENV)/.torchvision
# torch is pinned in pyproject.toml; it is installed first because natten's setup.py imports it to build.
TORCH  := $(shell grep -o '"torch==[^"]*"' pyproject.toml | tr -d '"')
KERNEL := $(PY) -m ipykernel install --sys-prefix --name weftlib --display-name "weftlib (RFD 1129)"
# JupyterLab refuses to start as root unless told; containers usually run as root.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)
# Clean filter: outputs that JupyterLab autosaves into notebooks/*.ipynb never reach git (see .gitattributes).
NBSTRIP := git config filter.nbstrip.clean "python3 scripts/nbstrip.py" && git config filter.nbstrip.smudge cat

# pytest on both cores (pytest-xdist): each test file on one worker, so a module's fixtures are built once, and
# the files that run whole notebooks handed out first (the order in tests/conftest.py). WORKERS=1 for one process.
WORKERS ?= 2
PYTEST := $(PY) -m pytest -q $(if $(filter 1,$(WORKERS)),-p no:xdist,-n $(WORKERS) --dist loadfile --no-loadscope-reorder)
# Lint, format and import layering (seconds), then mypy beside pytest. Its cache (.venv/.mypy_cache) holds the outside
# packages' analysis, made once when the venv is built (scripts/mypy_environment.py), so a fresh clone's first run
# analyses weftlib alone; later runs read weftlib's too. mypy's report is printed after pytest's; either failing fails
# the target.
define lint_and_pytest
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	log=$$(mktemp); $(VENV)/bin/mypy > $$log 2>&1 & types=$$!; \
	$(PYTEST) $(1); tests=$$?; \
	wait $$types; typed=$$?; test $$typed -eq 0 && echo "mypy: $$(tail -n 1 $$log)" || cat $$log; rm -f $$log; \
	test $$tests -eq 0 && test $$typed -eq 0
endef

.PHONY: appendix smoke check test lab publish git-filter clean-outputs

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip setuptools wheel
	$(PY) -m pip install --quiet "$(TORCH)"
	$(PY) -m pip install --quiet --no-build-isolation -e ".[dev,exporters]"
	$(KERNEL)
	$(PY) scripts/mypy_environment.py
	-@git rev-parse --git-dir >/dev/null 2>&1 && $(NBSTRIP)
	touch $@

# `import torchvision` in this venv, in a notebook or a script of yours: a .pth that declares torchvision's two
# schemas when it is first imported, since the pinned wheel is a CUDA build (weftlib/rebuild/torchvision_schemas.py).
$(VENV)/.torchvision: $(VENV)/.installed weftlib/rebuild/torchvision_schemas.py
	$(PY) -c "from weftlib.rebuild import torchvision_schemas as s; print('wrote', s.write_pth())"
	touch $@

$(VENV)/.installed-lab: $(VENV)/.installed
	$(PY) -m pip install --quiet --no-build-isolation -e ".[lab,dev,exporters]"
	touch $@

# Lab asks nothing of the outside world: no news pop-up, no update check (lab/overrides.json, installed where
# JupyterLab reads an environment's own settings; the server is told the same for its update check).
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings/overrides.json
$(LAB_SETTINGS): lab/overrides.json $(VENV)/.installed-lab
	mkdir -p $(dir $@)
	cp lab/overrides.json $@

git-filter:
	$(NBSTRIP)

# The real sources, brought by the user (nothing is fetched): `make appendix PIXAL3D=DIR NAF=DIR` gives each
# directory to every notebook with that parameter (host_root, hub_dir); refused unless each is that checkout.
SETS   := $(if $(PIXAL3D),--set "host_root=$(PIXAL3D)") $(if $(NAF),--set "hub_dir=$(NAF)")

appendix: $(SETUP)   ## the full-size plan (params/appendix.yaml) -> outputs/appendix/ [PIXAL3D=DIR NAF=DIR]
	$(PY) -m weftlib run --params params/appendix.yaml $(SETS)

smoke: $(SETUP)      ## the small CPU plan (params/default.yaml) -> outputs/smoke/ [PIXAL3D=DIR NAF=DIR]
	$(PY) -m weftlib run --params params/default.yaml $(SETS)

check: $(SETUP)      ## the inner loop, at most 3 min: lint, format, import layering, types, every test that runs no notebook and no export
	$(call lint_and_pytest,-m "not notebook and not exports")

test: $(SETUP)       ## all of check, the small plan under papermill (once, then its measuring notebooks under load), the real exporters (CI)
	$(call lint_and_pytest,)

lab: $(VENV)/.installed-lab $(VENV)/.torchvision $(LAB_SETTINGS)
	-@git rev-parse --git-dir >/dev/null 2>&1 && $(NBSTRIP)
	$(VENV)/bin/jupyter lab --config=lab/jupyter_server_config.py --ServerApp.root_dir="$(CURDIR)" --ServerApp.default_url=/lab/tree/notebooks --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate $(ALLOW_ROOT)

publish: $(SETUP)    ## make publish RFD=path/to/rfd/1129-hailo-operator-coverage [RUN=outputs/appendix]
	@test -n "$(RFD)" || { echo "usage: make publish RFD=<RFD folder> [RUN=<run folder>]" >&2; exit 2; }
	$(PY) -m weftlib publish "$(RUN)" --rfd "$(RFD)"

clean-outputs:
	find outputs -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf {} +
