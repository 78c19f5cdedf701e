# faultlab's set-up and checks. `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV := .venv
AGENTS_VENV := .venv-agents
OPENAI_AGENTS := 0.24.0
PIPECAT_VENV := .venv-pipecat
PIPECAT := 1.14.0
LIVEKIT_VENV := .venv-livekit
LIVEKIT_AGENTS := 1.8.9
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
APT_PACKAGES := iptables tcpdump iproute2 espeak-ng debootstrap tshark slirp4netns chromium libnss3-tools coturn
# Node.js for the JavaScript clients: Debian's, unless a `node` and an `npm` are installed already
# (NodeSource's nodejs provides npm itself and conflicts with Debian's npm package).
NODE_PACKAGES := nodejs npm
# The JavaScript clients (faultlab/clients/js): `npm ci` from the lock file, then the web page's
# bundle; both again when the lock file or a source changes.
JS := faultlab/clients/js
JS_SOURCES := $(JS)/package.json $(JS)/package-lock.json $(wildcard $(JS)/*.mjs $(JS)/web/*.mjs $(JS)/web/*.html) faultlab/scenarios/booking/conversation.json
# What an editor says of a profile (yaml-language-server), for tests/test_profile_editor.py.
EDITOR := tests/editor
# What the documentation site's build takes from npm (make docs).
DOCS_NPM := docs-build
# The Docker engine, for container members and `make images`: Debian's, unless an engine is
# installed already (Docker CE's packages conflict with docker.io's).
ENGINE_PACKAGE := docker.io
PROFILE ?= profiles/silent-loss.yaml
# faultlab's modules compiled ahead (only those changed since): where PYTHONDONTWRITEBYTECODE is
# set, as on this machine, every lab process would compile what it imports at each start
# (0.2-0.4 s of CPU each, measured: the emulator's start took 0.96 s, 0.56 s compiled).
COMPILE := $(BIN)/python -m compileall -q faultlab

.PHONY: install demo test test-pure lint schema docs docs-serve bench images clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile $(JS_SOURCES) $(EDITOR)/package-lock.json $(DOCS_NPM)/package-lock.json
	@if [ "$$(id -u)" = 0 ]; then \
	  missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	  { command -v node && command -v npm; } >/dev/null || missing="$$missing $(NODE_PACKAGES)"; \
	  command -v dockerd >/dev/null || dpkg -s $(ENGINE_PACKAGE) >/dev/null 2>&1 || missing="$$missing $(ENGINE_PACKAGE)"; \
	  if [ -n "$$missing" ]; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  fi; \
	  if [ -d /run/systemd/system ] && systemctl is-enabled -q coturn 2>/dev/null; then \
	    echo "disabling coturn's system service (faultlab starts its own in each lab that asks)"; \
	    systemctl disable -q --now coturn; \
	  fi; \
	fi
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else \
	  "faultlab needs Python >= 3.12; $(PYTHON) is " + sys.version.split()[0] + \
	  " (with pyenv, .python-version selects 3.13.0; or: make install PYTHON=python3.13)")'
	@# faultlab's own venv and the public clients of the emulator's conformance tests, each in a
	@# venv of its own, installed at once (their downloads and unpacking overlap): openai-agents
	@# (it pins websockets below 17, which the emulator needs), pipecat's
	@# OpenAIRealtimeLLMService and LiveKit Agents' OpenAI RealtimeModel (together 750 MB, pipecat
	@# ~500 and LiveKit ~420: numba, onnxruntime; PyAV, livekit's native SDK; each moves its pins
	@# as it will).
	$(PYTHON) -m venv $(VENV) && $(PYTHON) -m venv $(AGENTS_VENV) && $(PYTHON) -m venv $(PIPECAT_VENV) && $(PYTHON) -m venv $(LIVEKIT_VENV)
	$(BIN)/pip install -q --disable-pip-version-check -e '.[dev,docs]' & f=$$!; \
	$(AGENTS_VENV)/bin/pip install -q --disable-pip-version-check 'openai-agents==$(OPENAI_AGENTS)' & a=$$!; \
	$(PIPECAT_VENV)/bin/pip install -q --disable-pip-version-check 'pipecat-ai[openai,webrtc]==$(PIPECAT)' & p=$$!; \
	$(LIVEKIT_VENV)/bin/pip install -q --disable-pip-version-check \
	  'livekit-agents==$(LIVEKIT_AGENTS)' 'livekit-plugins-openai==$(LIVEKIT_AGENTS)' & l=$$!; \
	wait $$f; rf=$$?; wait $$a; ra=$$?; wait $$p; rp=$$?; wait $$l; rl=$$?; \
	[ $$rf = 0 ] && [ $$ra = 0 ] && [ $$rp = 0 ] && [ $$rl = 0 ]
	@# @google/genai 2.x runs on Node.js 20 (3.x needs 22); Debian 12's own nodejs is 18.
	@command -v npm >/dev/null || { echo "make install: npm is missing: the JavaScript clients need Node.js >= 20 and npm (as root: apt-get install $(NODE_PACKAGES))" >&2; exit 1; }
	@node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' || \
	  { echo "make install: the JavaScript clients need Node.js >= 20; node is $$(node --version)" >&2; exit 1; }
	@# No package's install script runs (none is needed: esbuild's binary comes as a package).
	npm ci --prefix $(JS) --no-audit --no-fund --ignore-scripts
	npm ci --prefix $(EDITOR) --no-audit --no-fund --ignore-scripts
	npm ci --prefix $(DOCS_NPM) --no-audit --no-fund --ignore-scripts
	node $(JS)/build.mjs
	@touch $(STAMP)

demo: install
	$(COMPILE)
	$(BIN)/faultlab run $(PROFILE)

# Two lanes: every test but those marked `alone` four at a time (a lab test judges only what it
# made, as with other runs on the machine, and mostly waits on its timeline: on 2 cores four
# workers took 308 s where three took 367 s, the machine 73 % busy instead of 60 % (2026-12-06);
# worksteal: the long ones leave no worker idle at the end); then, one at a time, those marked
# `alone`: several labs at once judged by their timings, a browser, a non-root user, Docker,
# which changes the host's own network that other lab tests compare before and after, or a test
# a loaded machine's own timing disturbs.
test: install
	$(COMPILE)
	$(BIN)/pytest -q -n 4 --dist worksteal -m "not alone" --durations=15
	$(BIN)/pytest -q -m "alone" --durations=15

test-pure: install
	$(COMPILE)
	$(BIN)/pytest -q -m "not lab and not rootless"

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy

# The profile's JSON Schema beside the shipped profiles, written anew from the models (a test
# fails when the file and the models differ).
schema: install
	$(BIN)/faultlab schema > faultlab/profiles/profile.schema.json

# The documentation site (mkdocs.yml): built offline into site/, every link checked (--strict);
# its reference pages are written from the code at each build. docs-serve: on localhost:8000.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict
docs-serve: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

# Every figure beside the tool a user would otherwise pick, in one run and one table
# (bench/all.py); BENCH_JSON=FILE also writes it as JSON for bench/compare.py. The pcap peers
# are dpkt and scapy (the `bench` extra); tshark comes with `install`.
bench: install
	$(BIN)/pip install -q --disable-pip-version-check -e '.[bench]'
	$(BIN)/python bench/all.py $(if $(BENCH_JSON),--json $(BENCH_JSON))

# The container images (faultlab-clients:latest, faultlab:latest), built offline on a debootstrapped
# trixie base that is kept between builds; FORCE=1 makes the base again. Needs a running engine
# (containers/engine.sh start).
images: install
	$(BIN)/python containers/build.py $(if $(filter 1 yes true,$(FORCE)),--force-base)

clean:
	rm -rf $(VENV) $(AGENTS_VENV) $(PIPECAT_VENV) $(LIVEKIT_VENV) runs build site .mypy_cache .ruff_cache .pytest_cache \
	  $(JS)/node_modules $(JS)/web/dist $(EDITOR)/node_modules $(DOCS_NPM)/node_modules
