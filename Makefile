# Offline commands first: both build .venv from the pinned requirements on first use.
STACK ?= dev
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STACKS := $(patsubst Pulumi.%.yaml,%,$(wildcard Pulumi.*.yaml))
# Caches outside the clone, reused by every clone on this machine: mypy reads 290 MB of pulumi_gcp once.
CACHE_HOME ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/tpu-gke
export MYPY_CACHE_DIR ?= $(CACHE_HOME)/mypy

.PHONY: render test lint format golden docs clean verify sax schemas

$(VENV)/.installed: requirements.txt requirements-dev.txt constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements-dev.txt -c constraints.txt
	touch $@

render: $(VENV)/.installed  ## offline preview of STACK into build/render/STACK/
	$(PY) -m tools.render --stack $(STACK)

test: $(VENV)/.installed  ## the whole test suite
	$(PY) -m pytest

lint: $(VENV)/.installed  ## formatter check, linter and strict type check (settings in pyproject.toml)
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

format: $(VENV)/.installed  ## apply the formatter and the linter's safe fixes
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

golden: $(VENV)/.installed  ## regenerate tests/golden/<stack>/ for every stack after an intended change (a stack that fails keeps its files)
	@status=0; for stack in $(STACKS); do $(PY) -m tools.render --stack $$stack --out tests/golden --keep-on-failure || status=1; done; exit $$status

clean:
	rm -rf build $(VENV)

docs: $(VENV)/.installed  ## regenerate the README config table from the schema
	$(PY) -m tools.config_table --write

verify: $(VENV)/.installed  ## smoke-test STACK's OpenAI-compatible endpoint [BASE_URL=http://host/v1 skips pulumi] [MODEL=name] [VERIFY_ARGS="--attempts 10"]
	$(PY) -m tools.verify --stack $(STACK) $(if $(BASE_URL),--base-url $(BASE_URL)) $(if $(MODEL),--model $(MODEL)) $(VERIFY_ARGS)

sax: $(VENV)/.installed  ## Saxml client, e.g. make sax CMD="listcell --model-id /sax/test/spmd" [SAX_STACK=saxml | SAX_ADDRESS=host:port]
	$(PY) -m tools.sax $(if $(SAX_ADDRESS),--address $(SAX_ADDRESS),--stack $(or $(SAX_STACK),saxml)) $(CMD)

schemas: $(VENV)/.installed  ## fetch the CRD files of schemas.lock into ${XDG_CACHE_HOME:-~/.cache}/tpu-gke/schemas, digests verified (SCHEMAS_FROM=../shared/schemas copies offline)
	$(PY) -m tools.schemas $(if $(SCHEMAS_FROM),--from $(SCHEMAS_FROM))
