# OWLer-py: set-up, the main job and the tests. Everything is installed by the project's own files:
# Debian packages (Java, Maven, leiningen, zookeeper, headless Chromium for the dashboard's test,
# tinyproxy and Dante, the HTTP and SOCKS proxies the proxy tests crawl through),
# a Python virtualenv with pinned packages, Apache Storm from Maven Central into .storm/
# (storm/install.sh), a single-node OpenSearch into .services/ (services/opensearch/install.sh),
# the dashboard's chart library from npm (services/dashboard/install.sh) and pywb, the replay tool
# the tests judge the crawl's CDXJ indices with, in a virtualenv of its own (services/pywb/).
# `make setup` is idempotent and returns at once when everything is in place.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export LEIN_ROOT := 1
export PATH := $(CURDIR)/$(BIN):$(PATH)

APT_PACKAGES := openjdk-17-jdk-headless maven leiningen zookeeper chromium-headless-shell \
	prometheus prometheus-pushgateway openssh-server openssh-client python3-virtualenv \
	tinyproxy dante-server
SEEDS ?=
CONF ?=
IDLE ?= 30

.PHONY: setup apt venv storm services urlfrontier risk dashboard pywb testdata fuzz crawl demo test unit integration bench clean

setup: apt venv storm services urlfrontier risk dashboard pywb testdata

# Re-checked when the Makefile changes (a new package in APT_PACKAGES reaches existing checkouts).
apt: .work/.apt.stamp
.work/.apt.stamp: Makefile
	@missing=""; for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "Installing Debian packages:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
	@mkdir -p .work && touch $@

venv: $(BIN)/.installed
$(BIN)/.installed: requirements.txt pyproject.toml setup.py src/owler/parse/_simhash.pyx
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q 'setuptools<66' wheel
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps --no-build-isolation -e .
	@touch $@

storm: apt venv
	@bash storm/install.sh
	@ln -sfn "$(CURDIR)/.storm/apache-storm-$$(cat storm/VERSION)/bin/storm" $(BIN)/storm

# A single-node OpenSearch (frontier.backend: opensearch; tests) from Maven Central into .services/.
services: apt
	@bash services/opensearch/install.sh

# The URLFrontier API (gRPC) for frontier.backend: urlfrontier and `owler frontier serve`: its
# descriptor rebuilt from the urlfrontier-API artifact on Maven Central (services/urlfrontier/).
urlfrontier: apt venv
	@bash services/urlfrontier/install.sh

# The lists of the risk-class parse filter (malicious: uBlock's badware list and URLhaus; adult:
# e2guardian's weighted phrases), taken from pinned Debian packages without installing them
# (services/risk/).
risk: apt
	@bash services/risk/install.sh

# The dashboard's chart library (uPlot, its npm package pinned in services/dashboard/VERSIONS),
# served by the dashboard itself.
dashboard:
	@bash services/dashboard/install.sh

# pywb (web archive replay; its packages pinned in services/pywb/requirements.txt) in a virtualenv
# of its own, .services/pywb-<version>: the tests replay a crawl through it from the crawl's WARC
# files and CDXJ indices, and compare its indexer's lines with the crawl's. Never in .venv: pywb
# pins Werkzeug, redis and gevent versions the crawler's packages would clash with.
pywb: apt
	@bash services/pywb/install.sh

# Real WARC files the tests read that the repository may not hold (GPL): into .work/testdata/.
testdata: venv
	@bash tests/testdata.sh

# The main job: inject SEEDS into the embedded frontier and crawl until idle.
# Without SEEDS: a demonstration on a generated web farm served on 127.0.0.x (no Internet needed).
crawl: setup
ifeq ($(strip $(SEEDS)),)
	$(BIN)/python -m tests.farm.demo --idle-exit $(IDLE)
else
	$(BIN)/owler inject $(SEEDS) $(if $(CONF),--conf $(CONF))
	$(BIN)/owler run explorative --idle-exit $(IDLE) $(if $(CONF),--conf $(CONF))
	$(BIN)/owler status $(if $(CONF),--conf $(CONF))
endif

# Two pytest-xdist workers: most tests wait on Storm, OpenSearch or a crawl rather than compute.
# Each worker has its own OpenSearch node and S3 server; the modules of the loopback Storm
# cluster (fixed ports) share one worker (xdist_group "storm-cluster").
TEST_WORKERS ?= 2
test: setup
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup tests

# The dedicated fuzz run: 10,000 generated or mutated inputs per parser of untrusted input
# (make test runs the same tests with 150 each). Each run draws its inputs from a new seed; a
# failure prints the OWLER_FUZZ_SEED and OWLER_FUZZ_EXAMPLES that draw the same inputs again.
fuzz: venv
	OWLER_FUZZ_EXAMPLES=10000 $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/fuzz

unit: venv risk dashboard
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/unit tests/component

integration: setup
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/integration

# Every benchmark (bench/run_all.py): crawls of two benchmark farms (politeness-bound and
# CPU-bound) by the explorative topology with and without WARC, Scrapy, StormCrawler (its jars:
# bench/stormcrawler/pom.xml, fetched on first use into .work/bench) and the bare loops;
# warc2warc against its bare loop; the frontier backends. Prints a table and writes it into
# BENCHMARKS.md. BENCH_ARGS passes options (e.g. --only explorative,scrapy --farms 3000x6).
BENCH_ARGS ?=
bench: setup $(BIN)/.bench-installed
	$(BIN)/python bench/run_all.py $(BENCH_ARGS)

$(BIN)/.bench-installed: bench/requirements.txt $(BIN)/.installed
	$(BIN)/pip install -q -r bench/requirements.txt
	@touch $@

clean:
	rm -rf .work _build _resources
