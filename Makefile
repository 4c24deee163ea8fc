# filejobs: every target bootstraps what it needs on a fresh clone.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
# Python 3.13: the pyenv build where there is one, else any python3.13 on PATH (resolved to a real path).
PYTHON313 := $(shell PYENV_VERSION=3.13.0 python3.13 -c 'import sys; print(sys.executable)' 2>/dev/null || python3.13 -c 'import sys; print(sys.executable)' 2>/dev/null)

# uv installs every venv's packages (a tenth of pip's time on a fresh clone); pip installs uv.
UV := $(BIN)/uv

# aws-sam-cli pins versions that clash with the project's: it gets a tool venv of its own.
SAM_VENV := .tools/sam
SAM := $(SAM_VENV)/bin/sam
# checkov too (its pins clash with both).
CHECKOV_VENV := .tools/checkov
CHECKOV := $(CHECKOV_VENV)/bin/checkov
# schemathesis too (its hypothesis pin is not the project's).
ST_VENV := .tools/schemathesis
ST := $(ST_VENV)/bin/st

# axe-core (npm): the accessibility rules the console's browser tests run in the page
# (tests/browser), pinned; injected from here, never fetched by a page.
AXE_VERSION := 4.10.3
AXE := .tools/axe/node_modules/axe-core/axe.min.js

.PHONY: install system-deps system-deps-check deploy-deps deploy delete axe console-screenshots bench-deps check test lint typecheck pytest template security api-fuzz chaos chaos-full cost-gate end-to-end soak bench demo dev clean locks docs docs-check

# The venv keeps pip (sam build runs this python's pip for the layers' requirements).
$(BIN)/python:
	@test -n "$(PYTHON313)" || { echo "python3.13 not found (try: pyenv install 3.13.0)" >&2; exit 1; }
	$(PYTHON313) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(UV): | $(BIN)/python
	$(BIN)/python -m pip install --quiet uv

$(VENV)/.installed: $(UV) pyproject.toml layers/filejobs/requirements.txt
	$(UV) pip install --quiet --python $(BIN)/python -e '.[dev,media]'
	@touch $@

install: $(VENV)/.installed

# Each Python layer's requirements.lock from its requirements.txt: every release the layer ships,
# pinned, with the sha256 of each of its files (infra/layers/Makefile installs with
# --require-hashes). Run after changing a requirements.txt, or to take new releases; commit the
# locks' diff.
PYTHON_LAYERS := filejobs imaging thumbnails video documents compression scanning
locks: $(UV)
	for layer in $(PYTHON_LAYERS); do \
	  (cd layers && ../$(UV) pip compile $$layer/requirements.txt --quiet --no-header \
	    --generate-hashes --python-platform aarch64-manylinux_2_28 --python-version 3.13 \
	    -o $$layer/requirements.lock) || exit 1; \
	done

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python tools/template.py --check
	$(BIN)/cfn-lint template.yaml

typecheck: install
	$(BIN)/mypy

# ClamAV (the virus scan's second engine: clamd, warm; clamscan, the benchmark's baseline;
# freshclam, the definitions updater; sigtool) and its test files, from Debian. Signature
# databases cannot be downloaded here: the tests build their own and serve them on 127.0.0.1.
# The ClamAV layer's build (infra/layers/clamav/debs.py, run by `sam build` in `make template`)
# trusts Debian's packages only through a Release that gpgv finds signed by a key of the
# debian-archive-keyring package's keyring (exported: debs.py reads DEBIAN_ARCHIVE_KEYRING);
# its tests sign an archive of their own with gpg and serve it over TLS with openssl's
# certificate. The console's browser tests drive Debian's chromium (Playwright's own browser
# download is never used) and take axe-core from npm. document_preview converts office documents
# to PDF with LibreOffice (soffice, headless: the -nogui packages); the LibreOffice layer's build
# compresses its archive with zstd. The Photoshop tests read files ImageMagick writes (its
# 16-bit and layered PSDs, as users send them): /usr/bin/convert.
export DEBIAN_ARCHIVE_KEYRING ?= /usr/share/keyrings/debian-archive-keyring.gpg
# One list, installed by system-deps and simulated whole (apt-get -s) by system-deps-check. npm
# is not in it: it comes with Node.js (NodeSource's nodejs package carries npm and Conflicts with
# Debian's npm, so asking apt for npm breaks a machine that has it); axe-core's target needs it.
APT_GET_INSTALL := apt-get install -y -qq --no-install-recommends \
    clamav clamav-daemon clamav-freshclam clamav-testfiles qemu-user-static \
    gpgv debian-archive-keyring gpg openssl chromium fonts-dejavu-core \
    libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui zstd imagemagick
DEBIAN_PACKAGES := $(filter-out apt-get install -%,$(APT_GET_INSTALL))
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Would the whole list install together on this machine, whatever is installed already? apt-get
# -s resolves it as a new machine would (a conflict with what a new machine has, such as
# NodeSource's nodejs against Debian's npm, fails it) and changes nothing. Run on every
# system-deps, so make test proves the install step even where every package is present.
system-deps-check:
	@test -n "$$(ls /var/lib/apt/lists/*_Packages* 2>/dev/null)" || $(SUDO) apt-get update -qq
	@out=$$(apt-get -s -y --no-install-recommends install $(DEBIAN_PACKAGES) 2>&1) || { \
	  echo "system-deps: apt-get cannot install the Debian packages together here:" >&2; \
	  echo "$$out" | grep -E 'Conflicts|Depends|Breaks|^E:' >&2; exit 1; }; \
	echo "system-deps-check: the $(words $(DEBIAN_PACKAGES)) Debian packages install together"

system-deps: system-deps-check
	@command -v clamscan >/dev/null && test -x /usr/sbin/clamd && command -v freshclam >/dev/null \
	  && command -v sigtool >/dev/null && test -d /usr/share/clamav-testfiles \
	  && command -v qemu-aarch64-static >/dev/null \
	  && command -v gpgv >/dev/null && test -f "$(DEBIAN_ARCHIVE_KEYRING)" \
	  && command -v gpg >/dev/null && command -v openssl >/dev/null \
	  && test -x /usr/bin/chromium && test -d /usr/share/fonts/truetype/dejavu \
	  && command -v soffice >/dev/null && command -v zstd >/dev/null \
	  && test -x /usr/bin/convert || { \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) $(APT_GET_INSTALL) >/dev/null; }

# The pinned axe-core, from npm: the machine's Node.js carries npm (never Debian's: see above).
$(AXE): | system-deps
	@command -v npm >/dev/null || { echo "axe-core: npm not found: install Node.js 18 or newer" \
	  "with its npm (NodeSource's nodejs package, or Debian's nodejs and npm together)" >&2; exit 1; }
	npm install --prefix .tools/axe --no-save --no-package-lock --no-audit --no-fund \
	  --ignore-scripts --loglevel=error axe-core@$(AXE_VERSION)
	@test -f $@

axe: $(AXE)

# The whole pytest suite, on every core (pytest-xdist): each test builds its own moto tables,
# servers and scratch folders, so none shares state with a test running beside it. A file's tests
# stay on one worker (--dist loadfile), so a file's module-scoped local stack starts once.
pytest: install system-deps $(AXE)
	$(BIN)/pytest -n auto --dist loadfile

# The console's browser tests alone, saving their screenshots to docs/console/ (README.md shows
# the overview's): run after a change to the console's look.
console-screenshots: install system-deps $(AXE)
	CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(BIN)/pytest -p no:cacheprovider tests/browser

# The quick loop for a change to the code: lint, types and the unit tests (the domain, the
# processors' pure rules and the tooling's, on fakes: no moto server, no ClamAV, no local stack).
check: lint typecheck
	$(BIN)/pytest -n auto tests/unit

$(SAM): | $(UV)
	$(UV) venv --quiet --clear --python $(PYTHON313) $(SAM_VENV)
	$(UV) pip install --quiet --python $(SAM_VENV)/bin/python aws-sam-cli

# sam validate --lint, then a container-free sam build (a real python3.13 first on PATH) into a
# scratch folder, so the working tree gets no .aws-sam; then every native library of the build
# must match its function's architecture and every function fit Lambda's 250 MB with its layers;
# the ClamAV layer's arm64 clamscan must find EICAR and the LibreOffice layer's arm64 soffice
# convert a DOCX, a spreadsheet and a presentation to PDF, each run under qemu-user here.
template: install system-deps $(SAM)
	SAM_CLI_TELEMETRY=0 $(SAM) validate --lint --region us-east-1
	build_dir=$$(mktemp -d) && trap 'rm -rf "$$build_dir" "$$build_dir.log"' EXIT && \
	  PATH="$(CURDIR)/$(BIN):$$PATH" SAM_CLI_TELEMETRY=0 \
	  $(SAM) build --region us-east-1 --build-dir "$$build_dir" --cache-dir "$$build_dir/cache" > "$$build_dir.log" 2>&1 \
	  || { cat "$$build_dir.log"; exit 1; }; echo "sam build: ok" && \
	  $(BIN)/python tools/check_build.py "$$build_dir" && \
	  $(BIN)/python infra/layers/clamav/debs.py smoke --layer "$$build_dir/ClamAvLayer" && \
	  $(BIN)/python infra/layers/libreoffice/debs.py smoke --layer "$$build_dir/LibreOfficeLayer"

$(CHECKOV): | $(UV)
	$(UV) venv --quiet --clear --python $(PYTHON313) $(CHECKOV_VENV)
	$(UV) pip install --quiet --python $(CHECKOV_VENV)/bin/python 'checkov>=3.2,<4'

# checkov on the template: 0 failed checks. Each skipped check is in template.yaml with its reason
# (the resource's Metadata.checkov.skip). --skip-download: no call to the vendor's guideline API.
security: $(CHECKOV)
	$(CHECKOV) --file template.yaml --framework cloudformation --compact --quiet --skip-download

$(ST): | $(UV)
	$(UV) venv --quiet --clear --python $(PYTHON313) $(ST_VENV)
	$(UV) pip install --quiet --python $(ST_VENV)/bin/python 'schemathesis==4.32.5'

# schemathesis over the committed OpenAPI document against the API on the local stack, as a
# tenant and as an operator: every check, 0 server errors, 0 schema violations
# (tools/fuzz_api.py; pinned, as a new release brings new checks).
api-fuzz: install $(ST)
	$(BIN)/python tools/fuzz_api.py --st $(ST)

# mkdocs and its Markdown extensions (pymdown-extensions: the snippets the pages include), pinned:
# the site is built strictly, and a new release can bring a new warning.
MKDOCS_VENV := .tools/mkdocs
MKDOCS := $(MKDOCS_VENV)/bin/mkdocs
$(MKDOCS): | $(UV)
	$(UV) venv --quiet --clear --python $(PYTHON313) $(MKDOCS_VENV)
	$(UV) pip install --quiet --python $(MKDOCS_VENV)/bin/python \
	  'mkdocs==1.6.1' 'pymdown-extensions==13.1.2' 'markdown==3.11.3'

# The manual (docs/, mkdocs.yml) as a site in site/, strict: a link to a missing page, file or
# anchor, a page left out of the navigation or a missing snippet fails it. docs-check (in `make
# test`) builds it the same way into a scratch folder.
# (Not --quiet: it hides the warnings from --strict too, and the build then passes whatever they say.)
docs: $(MKDOCS)
	$(MKDOCS) build --strict

docs-check: $(MKDOCS)
	site_dir=$$(mktemp -d) && trap 'rm -rf "$$site_dir"' EXIT && \
	  $(MKDOCS) build --strict --site-dir "$$site_dir"

# The whole system on the local stack under injected faults (crashes, transient failures,
# duplicate deliveries, DynamoDB throttling, concurrent sweeps, cancels), then an audit of every
# file, job, stream record and dead letter (tools/chaos.py; docs/RELIABILITY.md). Exits 1 on
# any violation. chaos: 60 files, in `make test`; chaos-full: 2,000 files.
chaos: install
	$(BIN)/python tools/chaos.py --mode quick

chaos-full: install
	$(BIN)/python tools/chaos.py --mode full

# The cost gate: the happy path on the local stack (3 files of each kind, about a minute), its
# DynamoDB requests and write units per job and per group against bench/costs.json; exits 1
# when one rose more than 5% (docs/BENCHMARKS.md). After an intended rise (or a saving), update
# the figures in the same change: .venv/bin/python bench/request_costs.py --write-figures
cost-gate: install
	$(BIN)/python bench/request_costs.py --check

# Files at a steady rate under chaos's faults for an hour (SOAK_MINUTES), every process's memory
# and the latency recorded over time, then chaos's audit; a plot in .filejobs/soak.png
# (tools/soak.py; docs/RELIABILITY.md). Exits 1 on a violation, memory growth or latency drift.
SOAK_MINUTES ?= 60
$(VENV)/.soak-installed: $(VENV)/.installed
	$(UV) pip install --quiet --python $(BIN)/python -e '.[dev,media,soak]'
	@touch $@

soak: $(VENV)/.soak-installed
	$(BIN)/python tools/soak.py --minutes $(SOAK_MINUTES)

# Everything, four at a time, the longest first: the pytest suite (on both cores) and the
# end-to-end runs on the local stack (api-fuzz, then chaos, which spend much of their time
# waiting on the stack's timers; then the cost gate, after chaos so the two stacks never share
# the machine) from the start, the static checks in the other two slots.
# Each part's output is printed whole when it ends; make fails if any part does.
test:
	$(MAKE) --no-print-directory -j4 --output-sync=target pytest end-to-end lint typecheck template security docs-check

end-to-end: api-fuzz
	$(MAKE) --no-print-directory chaos
	$(MAKE) --no-print-directory cost-gate

# What the processor benchmarks compare against: the CLIs (Debian) and libvips (the bench extra).
$(VENV)/.bench-installed: $(VENV)/.installed
	$(UV) pip install --quiet --python $(BIN)/python -e '.[dev,media,bench]'
	@touch $@

bench-deps: $(VENV)/.bench-installed
	@command -v ffmpeg >/dev/null && command -v pdftoppm >/dev/null && command -v zstd >/dev/null \
	  || { SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends \
	    ffmpeg poppler-utils zstd >/dev/null; }

# Every benchmark, one at a time (about 25 minutes), then docs/BENCHMARKS.md from their figures.
bench: bench-deps system-deps
	$(BIN)/python bench/report.py run

demo: install system-deps
	$(BIN)/python tools/demo.py

# The whole system on this machine (moto server + every function of template.yaml); Ctrl-C stops.
# The virus scan runs this machine's ClamAV, document_preview its LibreOffice: system-deps.
dev: install system-deps
	$(BIN)/filejobs dev $(DEV_ARGS)

# --- Deploy (docs/DEPLOY.md) -----------------------------------------------------------------
# ENV names a samconfig.toml environment (default, prod): its stack name, region, profile and
# parameter overrides. deploy: the stack name checked (the uploads bucket is named after it),
# sam build without a container, tools/check_build.py, then sam deploy, guided when the stack
# does not exist yet. delete: the stack's buckets emptied once you type the stack's name, then
# sam delete (the tables are kept). tools/deploy.py does both.
ENV ?= default

# What a build host needs beside the project's venv and SAM: the layers' Debian packages are
# taken only through a Release gpgv finds signed by debian-archive-keyring's keys, and the
# LibreOffice layer's archive is zstd. (Their download needs deb.debian.org.)
DEPLOY_APT_GET_INSTALL := apt-get install -y -qq --no-install-recommends \
    gpgv debian-archive-keyring zstd
deploy-deps: install $(SAM)
	@command -v gpgv >/dev/null && test -f "$(DEBIAN_ARCHIVE_KEYRING)" \
	  && command -v zstd >/dev/null || { \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) $(DEPLOY_APT_GET_INSTALL) >/dev/null; }

deploy: deploy-deps
	$(BIN)/python tools/deploy.py deploy --env $(ENV) --sam $(SAM)

delete: install $(SAM)
	$(BIN)/python tools/deploy.py delete --env $(ENV) --sam $(SAM)

clean:
	rm -rf $(VENV) .tools .mypy_cache .pytest_cache .ruff_cache .hypothesis .aws-sam site
