# Offline commands first: both build .venv from the pinned requirements on first use.
STACK ?= dev
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# checkov pins packaging<24 (pulumi needs >=26), so it lives in a venv of its own.
CHECKOV_VENV := .venv-checkov
# The documentation site's builder (MkDocs, Material) in a venv of its own, so constraints.txt stays pulumi's.
DOCS_VENV := .venv-docs
STACKS := $(patsubst Pulumi.%.yaml,%,$(wildcard Pulumi.*.yaml))
# Caches outside the clone, reused by every clone on this machine: mypy reads 290 MB of pulumi_gcp once.
CACHE_HOME ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/tpu-gke
export MYPY_CACHE_DIR ?= $(CACHE_HOME)/mypy
# Python's bytecode caches stay on whatever the shell says: with PYTHONDONTWRITEBYTECODE set, pytest rewrites the
# asserts of every test module in every worker at every run, and our own modules compile from source each time
# (make test: 78 s instead of 55 s warm on two cores). The caches go to __pycache__/, which git ignores.
unexport PYTHONDONTWRITEBYTECODE
# The weights-staging program and the venv it runs in (make staging-test, make lint): the Job's libraries, pinned.
STAGING_VENV := build/venv-staging
STAGING_REQUIREMENTS := manifests/serving/stage-weights-requirements.txt
STAGING_PROGRAM := manifests/serving/stage_weights.py

.PHONY: render render-diff test user-edits check-tools coverage lint format golden docs clean verify sax schemas charts itest twin policy-venv staging-test staging-bench renovate-check images bench bench-test

$(VENV)/.installed: requirements.txt requirements-dev.txt constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements-dev.txt -c constraints.txt
	touch $@

render: $(VENV)/.installed  ## offline preview of STACK into build/render/STACK/
	$(PY) -m tools.render --stack $(STACK)

$(CHECKOV_VENV)/.installed: requirements-checkov.txt constraints-checkov.txt
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements-checkov.txt -c constraints-checkov.txt
	touch $@

$(DOCS_VENV)/.installed: requirements-docs.txt constraints-docs.txt
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements-docs.txt -c constraints-docs.txt
	touch $@

# Renovate's config validator, pinned with the Node.js it needs (Renovate 44 wants Node 24; the machines have 20), from
# tools/renovate/package-lock.json into tools/renovate/node_modules. No install scripts run (nothing is built), and
# the optional native modules (re2, openpgp) are left out: the validator then checks regexes with JavaScript's
# engine and says so; tests/test_renovate.py holds them to RE2's syntax itself. Cold, about a minute.
RENOVATE_TOOLS := tools/renovate
RENOVATE_NODE := $(RENOVATE_TOOLS)/node_modules/.bin/node
RENOVATE_DIST := $(RENOVATE_TOOLS)/node_modules/renovate/dist

$(RENOVATE_TOOLS)/node_modules/.installed: $(RENOVATE_TOOLS)/package.json $(RENOVATE_TOOLS)/package-lock.json
	cd $(RENOVATE_TOOLS) && npm ci --prefer-offline --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

renovate-check: $(RENOVATE_TOOLS)/node_modules/.installed  ## validate renovate.json with Renovate's own validator, strict (installs it on first use)
	$(RENOVATE_NODE) $(RENOVATE_DIST)/config-validator.js --strict --no-global renovate.json

# The suite in two: `make test` needs .venv alone; the tests marked `external` (pytest.ini, tests/external.py) need what
# it does not hold, and `make check-tools` installs that and runs them. .ci/run runs both.
# make test's --dist worksteal: a worker that runs out takes tests from the other's queue, so neither idles at the end
# (about 5 s less than loadfile here; a run of the program the tests of a file repeat may then run once on each worker,
# tests/conftest.py). check-tools keeps a file's tests on one worker (loadfile): its files' fixtures run external tools.
PYTEST := $(PY) -m pytest -n auto
test: $(VENV)/.installed  ## the test suite on .venv alone (under a minute on two cores): every test but those of make check-tools
	$(PYTEST) --dist worksteal -m "not external"

# The stack files are the user's: accepted changes of them (renamed, removed, grown, moved onto a cluster made
# elsewhere) in copies of the tree, where `make golden` alone must make `make test` pass again. About a minute a
# scenario; .ci/run runs it.
user-edits: $(VENV)/.installed  ## the user's-edits drill (harness/user_edits.py): make golden, then make test, in copies of the tree under build/user-edits/ with the stack files changed as a user might
	$(PY) -m harness.user_edits

check-tools: $(VENV)/.installed $(CHECKOV_VENV)/.installed $(DOCS_VENV)/.installed $(RENOVATE_TOOLS)/node_modules/.installed  ## the tests that need a tool or file .venv does not hold: checkov's scan, the site's strict build, Renovate, the registry charts (fetched on first use) and the CRD files (make schemas)
	TPU_GKE_CHECKOV=$(CURDIR)/$(CHECKOV_VENV)/bin/checkov TPU_GKE_MKDOCS=$(CURDIR)/$(DOCS_VENV)/bin/mkdocs $(PYTEST) --dist loadfile -m external

coverage: $(VENV)/.installed  ## line and branch coverage of components/ and policy/ by make test's suite (settings in pyproject.toml; HTML in build/coverage)
	$(PYTEST) --dist worksteal -m "not external" --cov --cov-report=term --cov-report=html:build/coverage

lint: $(VENV)/.installed $(STAGING_VENV)/.installed  ## formatter check, linter and strict type check (settings in pyproject.toml)
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	@# the Job's staging program runs on its own pinned libraries: checked against them, in their venv
	$(VENV)/bin/mypy --python-executable $(STAGING_VENV)/bin/python $(STAGING_PROGRAM)

format: $(VENV)/.installed  ## apply the formatter and the linter's safe fixes
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

golden: $(VENV)/.installed  ## regenerate the committed summaries of each stack's render, tests/golden/<stack>/, after an intended change (a stack that fails keeps its files; a stack whose file is gone loses its own)
	@for dir in tests/golden/*/; do stack=$$(basename $$dir); [ -f Pulumi.$$stack.yaml ] || { echo "removed $$dir: no Pulumi.$$stack.yaml"; rm -r $$dir; }; done
	@status=0; for stack in $(STACKS); do $(PY) -m tools.render --stack $$stack --out tests/golden --keep-on-failure --golden || status=1; done; exit $$status

# The render of every stack against BASE's, as the pull-request workflow diffs them: BASE's tree (git archive) renders
# with this .venv into build/render-diff/base, the working tree into build/render-diff/head.
BASE ?= main
render-diff: $(VENV)/.installed  ## diff every stack's render against BASE's (default main) into build/render-diff/render.diff and print it [BASE=<commit>]
	@rm -rf build/render-diff && mkdir -p build/render-diff/base-tree build/render-diff/base build/render-diff/head
	git archive $(BASE) | tar -x -C build/render-diff/base-tree
	@cd build/render-diff/base-tree && for file in Pulumi.*.yaml; do stack=$${file#Pulumi.}; stack=$${stack%.yaml}; \
	  $(CURDIR)/$(PY) -m tools.render --stack $$stack --out $(CURDIR)/build/render-diff/base > /dev/null \
	    || echo "render-diff: stack $$stack does not render at $(BASE): its whole render shows as added" >&2; done
	@for stack in $(STACKS); do $(PY) -m tools.render --stack $$stack --out build/render-diff/head > /dev/null || exit 1; done
	@status=0; diff -ruN build/render-diff/base build/render-diff/head > build/render-diff/render.diff || status=$$?; \
	  [ $$status -le 1 ] || exit $$status; cat build/render-diff/render.diff; \
	  echo "render-diff: $$(grep -c '^diff ' build/render-diff/render.diff) file(s) of the render differ from $(BASE)'s"

clean:
	rm -rf build $(VENV) $(CHECKOV_VENV) $(DOCS_VENV) $(POLICY_VENV) $(RENOVATE_TOOLS)/node_modules

docs: $(VENV)/.installed $(DOCS_VENV)/.installed  ## regenerate the config table from the schema and the CIS table from policy/cis.py, then build the site (docs/, mkdocs.yml) into build/site with --strict
	$(PY) -m tools.config_table --write
	$(PY) -m tools.cis_table --write
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict --quiet

images: $(VENV)/.installed  ## the images STACK runs, and the commands that pin each by digest and fill its mirror (offline)
	$(PY) -m tools.images --stack $(STACK)

verify: $(VENV)/.installed  ## smoke-test STACK's OpenAI-compatible endpoint [BASE_URL=http://host/v1 skips pulumi] [MODEL=name] [VERIFY_ARGS="--attempts 10"]
	$(PY) -m tools.verify --stack $(STACK) $(if $(BASE_URL),--base-url $(BASE_URL)) $(if $(MODEL),--model $(MODEL)) $(VERIFY_ARGS)

bench: $(VENV)/.installed  ## benchmark STACK's endpoint with inference-perf as a Job in the cluster, print throughput, TTFT and TPOT per rate [BASE_URL=http://host/v1] [BENCH_ARGS="--rates 1,2,4,8 --stage-seconds 120"]
	$(PY) -m tools.bench --stack $(STACK) $(if $(BASE_URL),--base-url $(BASE_URL)) $(BENCH_ARGS)

sax: $(VENV)/.installed  ## Saxml client, e.g. make sax CMD="listcell --model-id /sax/test/spmd" [SAX_STACK=saxml | SAX_ADDRESS=host:port]
	$(PY) -m tools.sax $(if $(SAX_ADDRESS),--address $(SAX_ADDRESS),--stack $(or $(SAX_STACK),saxml)) $(CMD)

schemas: $(VENV)/.installed  ## fetch the CRD files of schemas.lock into ${XDG_CACHE_HOME:-~/.cache}/tpu-gke/schemas, digests verified (SCHEMAS_FROM=../shared/schemas copies offline)
	$(PY) -m harness.schemas $(if $(SCHEMAS_FROM),--from $(SCHEMAS_FROM))

charts: $(VENV)/.installed  ## fetch the chart module zips of charts.lock into ${XDG_CACHE_HOME:-~/.cache}/tpu-gke/charts, digests verified (the tests do it on first use; CHARTS_FROM=$$(go env GOMODCACHE)/cache/download copies offline)
	$(PY) -m harness.charts $(if $(CHARTS_FROM),--from $(CHARTS_FROM))

# The policy pack's own virtualenv (policy/PulumiPolicy.yaml names it): what the CLI runs the pack with.
POLICY_VENV := policy/.venv

$(POLICY_VENV)/.installed: policy/requirements.txt constraints.txt
	$(PYTHON) -m venv $(POLICY_VENV)
	$(POLICY_VENV)/bin/pip install --quiet --disable-pip-version-check -r policy/requirements.txt -c constraints.txt
	touch $@

policy-venv: $(POLICY_VENV)/.installed  ## policy/.venv, for `pulumi preview --policy-pack policy`

# The integration lab (lab/, tests/itest): its own venv, since the lab's Python SDK must match the provider
# plugin the Go module proxy serves (lab/requirements.txt says why).
VENV_LAB := build/venv-lab
LAB_PY := $(VENV_LAB)/bin/python

itest:  ## integration lab: real Pulumi CLI and Kubernetes provider against etcd, kube-apiserver and KCM on 127.0.0.1 (cold first run: tools built, ~35 min)
	@lab/build.sh --status >/dev/null 2>&1 || echo "make itest: the lab's tools are not all built; building them now (cold: about 35 minutes on 2 cores, see lab/build.sh)"
	@mkdir -p build; start=$$(date +%s); lab/build.sh && echo $$(( $$(date +%s) - start )) > build/.lab-build-seconds
	@if [ ! -f $(VENV_LAB)/.installed ] || [ lab/requirements.txt -nt $(VENV_LAB)/.installed ]; then \
	  rm -rf $(VENV_LAB) && $(PYTHON) -m venv $(VENV_LAB) && \
	  $(VENV_LAB)/bin/pip install --quiet --disable-pip-version-check -r lab/requirements.txt && touch $(VENV_LAB)/.installed; fi
	$(MAKE) --no-print-directory render STACK=dev policy-venv
	LAB_BUILD_SECONDS=$$(cat build/.lab-build-seconds) $(LAB_PY) -m pytest tests/itest

# The TPU7x twin (docs/lab.md): Kueue's manager and kwok on the lab's control plane. make itest runs its tests when
# its tools are built (and skips them, saying so, when not); make twin builds them (cold about 7 minutes) and runs them.
twin:  ## the TPU7x twin's tests alone: the controllers' webhooks on the stack's objects, its admission, preemption and placement scenarios, build/itest/twin-report.md (builds the lab's and the twin's tools first)
	@lab/build.sh && lab/build.sh twin
	@if [ ! -f $(VENV_LAB)/.installed ] || [ lab/requirements.txt -nt $(VENV_LAB)/.installed ]; then \
	  rm -rf $(VENV_LAB) && $(PYTHON) -m venv $(VENV_LAB) && \
	  $(VENV_LAB)/bin/pip install --quiet --disable-pip-version-check -r lab/requirements.txt && touch $(VENV_LAB)/.installed; fi
	$(LAB_PY) -m pytest tests/itest/test_twin_kueue.py tests/itest/test_twin_scenarios.py

# Weights staging (manifests/serving/stage_weights.py) against real local servers: the program runs in its own venv,
# installed exactly as the Job's init container installs it (pip --require-hashes, wheels only), and talks to the
# Hub stand-in of harness/staging_lab.py and to fake-gcs-server (lab/build-fake-gcs.sh builds it once, ~2 min cold).

$(STAGING_VENV)/.installed: $(STAGING_REQUIREMENTS)
	rm -rf $(STAGING_VENV) && $(PYTHON) -m venv $(STAGING_VENV)
	$(STAGING_VENV)/bin/pip install --quiet --disable-pip-version-check --require-hashes --only-binary=:all: -r $(STAGING_REQUIREMENTS)
	touch $@

staging-test: $(VENV)/.installed $(STAGING_VENV)/.installed  ## weights staging against the Hub stand-in and fake-gcs-server (about a minute warm)
	FAKE_GCS_SERVER=$$(lab/build-fake-gcs.sh) && STAGING_PYTHON=$(CURDIR)/$(STAGING_VENV)/bin/python \
	  FAKE_GCS_SERVER=$$FAKE_GCS_SERVER $(PY) -m pytest tests/staging

staging-bench: $(VENV)/.installed $(STAGING_VENV)/.installed  ## benchmark: old vs new staging program, a few GB from the Hub stand-in to fake-gcs-server [BENCH_ARGS="--gigabytes 3"]
	FAKE_GCS_SERVER=$$(lab/build-fake-gcs.sh) && STAGING_PYTHON=$(CURDIR)/$(STAGING_VENV)/bin/python \
	  FAKE_GCS_SERVER=$$FAKE_GCS_SERVER $(PY) -m harness.staging_bench $(BENCH_ARGS)

# The serving benchmark's harness (inference-perf, at the version of the Job's image) in its own venv, run by the
# command against a stand-in OpenAI-compatible server on 127.0.0.1 (tests/bench). lab/bench-requirements.txt says
# why it installs with --ignore-requires-python.
BENCH_VENV := build/venv-bench
BENCH_REQUIREMENTS := lab/bench-requirements.txt

$(BENCH_VENV)/.installed: $(BENCH_REQUIREMENTS)
	rm -rf $(BENCH_VENV) && $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install --quiet --disable-pip-version-check --no-deps --ignore-requires-python --only-binary=:all: -r $(BENCH_REQUIREMENTS)
	touch $@

bench-test: $(VENV)/.installed $(BENCH_VENV)/.installed  ## the benchmark command and its report parsing end to end, inference-perf against a stand-in server on 127.0.0.1 (a few minutes)
	BENCH_INFERENCE_PERF=$(CURDIR)/$(BENCH_VENV)/bin/inference-perf BENCH_PYTHON=$(CURDIR)/$(BENCH_VENV)/bin/python \
	  $(PY) -m pytest tests/bench
