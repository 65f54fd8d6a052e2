# The two commands of the README: `make run` (the main job) and `make test` (the whole suite).
PY := .venv/bin/python
ALGO ?= ppo
ENV ?= CartPole-v1

.PHONY: setup run demo test lint unit docs docs-serve

setup:
	@bash scripts/setup.sh

# Main job: train PPO on CartPole-v1 on Ray (started for you) until a mean return of 475.
run: setup
	.venv/bin/rlflow train $(ALGO) --env $(ENV) --stop-reward 475 --stop-timesteps 300000

demo: setup
	$(PY) examples/dataflow_demo.py

lint: setup
	.venv/bin/ruff format --check src tests benchmarks examples docs/hooks
	.venv/bin/ruff check src tests benchmarks examples docs/hooks
	.venv/bin/mypy

# Whole suite: lint + types + unit, ray and learning tests.
test: lint
	$(PY) -m pytest -q

unit: setup
	$(PY) -m pytest -q -m "not ray and not learning"

# The documentation site (mkdocs.yml, docs/): built into site/, every warning an error.
docs: setup
	.venv/bin/mkdocs build --strict

# Serve the site on http://127.0.0.1:8000, rebuilt on every change.
docs-serve: setup
	.venv/bin/mkdocs serve
