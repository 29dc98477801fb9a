# softwalltime developer commands. `make test` is what CI runs (.ci/run).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

# Code that pbs_server's embedded Python imports: Python 3.6+, standard library only (the
# database client is softwalltime/hook/pgwire/; tests/test_architecture.py enforces it).
HOOK_PATH := softwalltime/__init__.py softwalltime/errors.py softwalltime/units.py \
             softwalltime/core softwalltime/hook hooks/softwalltime_hook.py
# The database docker-compose.yml starts (a local development password).
COMPOSE_DSN := postgresql://softwalltime:softwalltime@127.0.0.1:5432/softwalltime
LINTED    := $(wildcard softwalltime ingest hooks migrations tests packaging)

.PHONY: test test-fast lint pytest demo demo-stop clean man compile

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

## test: lint, type check, Python 3.6 compatibility of the hook path, then the whole suite
test: lint pytest

lint: $(VENV)/.installed
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/mypy
	$(BIN)/vermin -q -t=3.6- --no-tips --violations $(HOOK_PATH)
	$(BIN)/vermin -q -t=3.9- --no-tips --violations --eval-annotations softwalltime ingest migrations

pytest: compile
	$(BIN)/pytest

## test-fast: the suite without the tests marked slow (pyproject's markers), after every change
test-fast: compile
	$(BIN)/pytest -q -m 'not pbs and not slow'

## compile: the simulator's hot modules as C extensions in place (mypyc), when missing or stale
compile: $(VENV)/.installed
	$(BIN)/python packaging/compile_simulator.py --if-needed

## man: a man page per command and subcommand, and softwalltime.json(5), in build/man (from the argparse definitions)
man: $(VENV)/.installed
	$(BIN)/python -m softwalltime.cli.manpage build/man --config-page build/man

## test-pbs: the hook inside a real OpenPBS server (root, Debian 12; make pbs-up first, by itself)
.PHONY: test-pbs
test-pbs: compile pbs-up
	$(BIN)/pytest -m pbs tests/pbs

# The real OpenPBS 23.06.06 the pbs tests use (tests/pbs/server/; root, Debian 12). The source
# tarball: $$OPENPBS_TARBALL, else the cache ($$SOFTWALLTIME_CACHE_DIR, default
# ~/.cache/softwalltime), else a download into the cache; always checked by sha256.
PBS_HARNESS := tests/pbs/server
## pbs-up: build OpenPBS into /opt/pbs unless it is there (a few minutes), then start it in its namespaces
.PHONY: pbs-up pbs-down
pbs-up:
	$(PBS_HARNESS)/build.sh
	$(PBS_HARNESS)/up.sh

## pbs-down: stop the OpenPBS server (PURGE=1 also removes its namespaces, hosts line and route)
pbs-down:
	$(PBS_HARNESS)/down.sh $(if $(PURGE),--purge)

## demo: end to end on a throwaway local PostgreSQL (or $SOFTWALLTIME_DSN if set)
demo: $(VENV)/.installed
	@set -e; \
	if [ -n "$$SOFTWALLTIME_DSN" ]; then :; \
	elif $(BIN)/python -c 'import softwalltime.db.localpg as l; l.find_bindir()' 2>/dev/null; then \
	  SOFTWALLTIME_DSN=$$($(BIN)/python -m softwalltime.db.localpg ensure .demo/pg); \
	  echo "# throwaway PostgreSQL in .demo/pg (make demo-stop stops it): $$SOFTWALLTIME_DSN"; \
	elif docker compose up -d --wait 2>/dev/null; then \
	  SOFTWALLTIME_DSN=$(COMPOSE_DSN); \
	  echo "# PostgreSQL from docker-compose.yml (docker compose down stops it)"; \
	else \
	  echo "make demo needs the PostgreSQL server binaries (apt-get install postgresql)," \
	       "a Docker engine, or SOFTWALLTIME_DSN" >&2; exit 1; \
	fi; \
	export SOFTWALLTIME_DSN; \
	echo "$$ softwalltime db upgrade"; $(BIN)/softwalltime db upgrade; \
	echo "$$ softwalltime ingest softwalltime/data/*.log"; \
	$(BIN)/softwalltime ingest --no-progress softwalltime/data/*.log; \
	echo "$$ softwalltime predict --user vchlum --walltime 02:00:00"; \
	$(BIN)/softwalltime predict --user vchlum --walltime 02:00:00; \
	echo "$$ softwalltime predict --user alice --walltime 00:10:00 --predictor v1"; \
	$(BIN)/softwalltime predict --user alice --walltime 00:10:00 --predictor v1; \
	echo "$$ softwalltime evaluate softwalltime/data/CERIT-SC-wagap-2013.alea.swf.gz"; \
	$(BIN)/softwalltime evaluate softwalltime/data/CERIT-SC-wagap-2013.alea.swf.gz; \
	echo "$$ softwalltime simulate --procs 2176 --estimates users,v3,perfect softwalltime/data/CERIT-SC-wagap-2013.alea.swf.gz"; \
	$(BIN)/softwalltime simulate --procs 2176 --estimates users,v3,perfect \
	  softwalltime/data/CERIT-SC-wagap-2013.alea.swf.gz; \
	mkdir -p .demo; \
	echo "$$ softwalltime report --out .demo/report.html"; \
	$(BIN)/softwalltime report --out .demo/report.html; \
	echo "# open $$PWD/.demo/report.html in a browser: what soft walltimes did in this history"; \
	echo "# to run further commands on this database:"; \
	echo "#   export SOFTWALLTIME_DSN='$$SOFTWALLTIME_DSN' PATH=\"$$PWD/$(BIN):\$$PATH\""

demo-stop:
	@[ ! -d .demo/pg ] || $(BIN)/python -m softwalltime.db.localpg stop .demo/pg

clean: demo-stop
	@[ ! -d .bench/pg ] || $(BIN)/python -m softwalltime.db.localpg stop .bench/pg
	rm -rf $(VENV) .demo .bench build dist .hypothesis *.egg-info .pytest_cache .mypy_cache .ruff_cache
	rm -f softwalltime/replay/*.so

## bench-hook: hook decision time (warm/cold connection) over 1M history rows / 10k users
.PHONY: bench-hook
bench-hook: $(VENV)/.installed
	$(BIN)/python tests/benchmarks/bench_hook.py

## bench-ingest: 1,000,000-job accounting log from the HPC2N trace -> parse and load rates
.PHONY: bench-ingest
bench-ingest: $(VENV)/.installed
	$(BIN)/python tests/benchmarks/bench_ingest.py

## bench-refresh: softwalltime refresh over 1,000 held jobs on the real OpenPBS server (root)
.PHONY: bench-refresh
bench-refresh: $(VENV)/.installed
	$(BIN)/python tests/benchmarks/bench_refresh.py

## bench-pbs: qsub throughput on the real OpenPBS server (no hook / empty hook / softwalltime)
.PHONY: bench-pbs
bench-pbs: $(VENV)/.installed
	$(BIN)/python tests/benchmarks/bench_pbs.py

## bench-twin: a KTH-SP2 segment replayed on the real OpenPBS server against simulate (root)
.PHONY: bench-twin
bench-twin: $(VENV)/.installed
	$(BIN)/python tests/benchmarks/bench_twin.py $(TWIN_ARGS)

## bench-twin-site: a CERIT-SC 2013 segment on its scaled-down site (vnodes, routing queue, pools) against the node model (root)
.PHONY: bench-twin-site
bench-twin-site: $(VENV)/.installed
	$(BIN)/python tests/benchmarks/bench_twin.py --site cerit $(TWIN_ARGS)

## bench-classes: the scheduler's cycle time with the rank on sched_config's resources: line (root)
.PHONY: bench-classes
bench-classes: $(VENV)/.installed
	$(BIN)/python tests/benchmarks/bench_classes.py $(CLASSES_ARGS)

## bench-evaluate: replay speed (jobs/s) per predictor on HPC2N and CERIT-SC
.PHONY: bench-evaluate
bench-evaluate: $(VENV)/.installed
	$(BIN)/python tests/benchmarks/bench_evaluate.py

## bench-simulate: scheduler simulation time and jobs/s per estimate source on HPC2N
.PHONY: bench-simulate
bench-simulate: compile
	$(BIN)/python tests/benchmarks/bench_simulate.py

## bench-nodes: the node level's cost: jobs/s of the pool vs the vnodes on 5,000 CERIT-SC jobs
.PHONY: bench-nodes
bench-nodes: compile
	$(BIN)/python tests/benchmarks/node_level.py

## bench-soak: pbs_server's memory over 20,000 hook events, softwalltime vs an empty hook (root)
.PHONY: bench-soak
bench-soak: $(VENV)/.installed
	$(BIN)/python tests/benchmarks/bench_soak.py

## deb: dist/softwalltime_VERSION_ARCH.deb (dpkg-deb; a self-contained venv under /opt/softwalltime)
.PHONY: deb
deb: $(VENV)/.installed
	PIP=$(BIN)/pip packaging/build-deb.sh dist

## bench-report: softwalltime report over 1,000,000 finished jobs (target <= 5 s)
.PHONY: bench-report
bench-report: $(VENV)/.installed
	$(BIN)/python tests/benchmarks/bench_report.py

## rpm: dist/softwalltime-VERSION-1.ARCH.rpm (rpmbuild of packaging/softwalltime.spec; apt-get install rpm)
.PHONY: rpm
rpm: $(VENV)/.installed
	PIP=$(BIN)/pip packaging/build-rpm.sh dist

## bench-prune: db prune over 1M history rows / 10k users (batches vs one DELETE)
.PHONY: bench-prune
bench-prune: $(VENV)/.installed
	$(BIN)/python tests/benchmarks/bench_prune.py

## bench-wait: queue-wait replay speed (HPC2N, 40,000 targets, both estimated run times)
.PHONY: bench-wait
bench-wait: $(VENV)/.installed
	$(BIN)/python tests/benchmarks/bench_wait.py
