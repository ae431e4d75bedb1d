# Two commands set up a fresh machine and do everything:
#   make run    install, then run the main job
#   make test   install, then every test (Rust and Python)
SHELL := /bin/bash
.DEFAULT_GOAL := run

PYTHON ?= python3
VENV := .venv
# Where it is set (as on CI), every process would compile pandas, matplotlib and sklearn from
# source at each import (6-9 s a `cclab` process instead of 1-3 s): the venv's bytecode is
# written once, at the first import of each module, as Python does by default.
unexport PYTHONDONTWRITEBYTECODE
export PATH := $(HOME)/.cargo/bin:$(PATH)

# Editable install: Python edits need no reinstall, but the Rust extension is rebuilt
# whenever a crate changes.
RUST_INPUTS := Cargo.toml Cargo.lock $(shell find crates -name '*.rs' -o -name Cargo.toml)
INSTALLED := $(VENV)/.installed


.PHONY: install system-deps browser-deps test run recommend-model

install: system-deps $(INSTALLED)

# The kernel engine drives iperf3, iptables (loss and counters), ethtool (offloads)
# and ping (idle RTT check), and builds BBR at other gains as a BPF congestion control
# with clang, libbpf's headers and bpftool (Debian puts it in /usr/sbin); the simulator
# needs none of them.
KERNEL_TOOLS := iperf3 iptables ethtool ping clang
system-deps:
	@missing=; for t in $(KERNEL_TOOLS); do command -v $$t >/dev/null || missing=1; done; \
	{ command -v bpftool >/dev/null || test -x /usr/sbin/bpftool; } || missing=1; \
	test -f /usr/include/bpf/bpf_helpers.h || missing=1; \
	if [ -n "$$missing" ]; then apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y iperf3 iptables ethtool iputils-ping clang libbpf-dev bpftool; fi
	@command -v cargo >/dev/null || { command -v rustup >/dev/null && rustup default stable; } || \
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y cargo rustc; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "error: cclab needs Python >= 3.11 (PYTHON=$(PYTHON) is older)" >&2; exit 2; }

$(INSTALLED): pyproject.toml $(RUST_INPUTS)
	# The kernel engine's NFQUEUE delay line (used where the kernel has no netem), built beside
	# the simulator's extension in a target directory of its own, so neither waits for the
	# other's lock (engines/kernel/delayline.py looks there first).
	CARGO_TARGET_DIR=target/delayline cargo build --quiet --release -p cclab-delayline & delayline=$$!; \
	$(MAKE) --no-print-directory python-env; status=$$?; wait $$delayline || status=1; exit $$status
	touch $@

.PHONY: python-env
python-env:
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	# uv installs the dependencies from its cache in about a second where pip takes about 45 s
	# (measured on a fresh virtual environment here); it builds cclab itself through maturin
	# as pip would. It writes no bytecode: Python writes it for each module at its first
	# import (PYTHONDONTWRITEBYTECODE is unexported above), a few thousand modules of the
	# venv's eleven thousand, where compiling them all at install took 45 s of CPU.
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check "uv>=0.4"
	$(VENV)/bin/uv pip install --quiet --python $(VENV)/bin/python -e ".[test]"
	# What every cclab process imports is compiled now (10 s of CPU), so that a cclab run
	# outside make, with PYTHONDONTWRITEBYTECODE set, finds it compiled.
	$(VENV)/bin/python -c "import cclab.cli, cclab.sweep, cclab.store, pandas, pyarrow.parquet, matplotlib.pyplot, sklearn.tree, scipy.stats, duckdb, rich.progress"
	$(VENV)/bin/python -m compileall -q python/cclab

# The report's browser tests drive Debian's chromium through playwright (a pip package in the
# test extra); `playwright install` is never run: it would download a browser of its own.
browser-deps:
	@command -v chromium >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }

test: system-deps browser-deps
	# The Rust tests build and run under SCHED_IDLE (chrt --idle) from the start, in their own
	# target directory (so neither waits for the other's lock): the install's build takes the
	# CPU first, and the tests start as soon as it is done. Then the kernel engine's tests
	# (tests/kernel) run in real time, one at a time, at normal priority, with the CPU-bound
	# rest beside them, also under SCHED_IDLE: one pytest worker per core, a file to a worker,
	# the longest files first (tests/conftest.py LONGEST_FILES)
	# (module fixtures run once). An idle-policy task gives way at once to the kernel runs'
	# tasks (the delay line is SCHED_FIFO besides): measured here, kernel runs beside it were as
	# punctual as alone or more (a busy vCPU is not descheduled by the hypervisor), and their
	# validity checks tell a machine busy with such work from one that held the run up
	# (engines/kernel/assemble.py). No test asserts on wall-clock time (bench/ measures that).
	# cclab-py links against libpython only when loaded by Python: the pytest suite tests it.
	# Every part runs even if one fails; the other parts' output follows the kernel tests'.
	status=0; mkdir -p target; \
	chrt --idle 0 env CARGO_INCREMENTAL=0 CARGO_TARGET_DIR=target/tests sh -c \
		'cargo test --workspace --exclude cclab-py --no-run && cargo test --workspace --exclude cclab-py' > target/cargo-test.log 2>&1 & cargo=$$!; \
	$(MAKE) --no-print-directory install || { wait $$cargo; exit 1; }; \
	echo "make test: installed after $$SECONDS s"; \
	chrt --idle 0 $(VENV)/bin/pytest -n auto --dist loadfile --no-loadscope-reorder --ignore=tests/kernel > target/pytest-rest.log 2>&1 & rest=$$!; \
	$(VENV)/bin/pytest tests/kernel || status=$$?; \
	echo "make test: kernel tests done after $$SECONDS s"; \
	wait $$rest || status=$$?; cat target/pytest-rest.log; echo "make test: the rest done after $$SECONDS s"; \
	wait $$cargo || status=$$?; cat target/cargo-test.log; echo "make test: Rust tests done after $$SECONDS s"; exit $$status

run: install
	# The main job: the "When to use BBR" study (Cao et al., IMC 2019) on the simulator:
	# 640 runs + finite-flow runs, figures, decision tree and summary in out/cao2019/.
	$(VENV)/bin/cclab reproduce cao2019 --out out/cao2019

# Rebuild the model `cclab recommend` ships (python/cclab/data/recommend_model.json): the full
# cao2019 grid (BBRv1, BBRv2, BBRv3, CUBIC) and the rebbr loss curves on the simulator.
recommend-model: install
	$(VENV)/bin/cclab reproduce cao2019 --out out/cao2019
	$(VENV)/bin/cclab reproduce rebbr --out out/rebbr
	$(VENV)/bin/python -c "from cclab.analysis.recommend import bundle; bundle('out/cao2019', 'out/rebbr')"
