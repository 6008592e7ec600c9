#!/usr/bin/env bash
# The project's test command (README and CI run exactly this): lint, type-check, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
.venv/bin/ruff check hdp_spark tests benchmarks scripts
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
