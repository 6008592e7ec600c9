#!/usr/bin/env bash
# The project's test command (README and CI run exactly this): lint, type-check, tests.
#
# The whole suite runs on HDP_TEST_WORKERS pytest-xdist workers (default 2, --dist loadgroup:
# tests sharing a Spark server or a module fixture stay on one worker, see tests/conftest.py).
# A run that names tests (`bash scripts/test.sh tests/x.py -q`) stays in one process unless
# HDP_TEST_WORKERS is set; HDP_TEST_WORKERS=0, or the caller's own -n / -p no:xdist, turns
# the workers off.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
.venv/bin/ruff check hdp_spark tests benchmarks scripts
.venv/bin/mypy
workers="${HDP_TEST_WORKERS:-}"
if [[ -z "$workers" ]]; then
    workers=2
    for arg in "$@"; do
        if [[ "$arg" != -* && -e "${arg%%::*}" ]]; then workers=0; fi  # a selection of tests
    done
fi
for arg in "$@"; do
    case "$arg" in -n | -n* | --numprocesses* | no:xdist | -pno:xdist) workers=0 ;; esac
done
if [[ "$workers" != 0 ]]; then
    set -- -n "$workers" --dist loadgroup "$@"
fi
.venv/bin/python -m pytest "$@"
