#!/usr/bin/env bash
# The project's test command (README and CI run exactly this): lint, type-check, tests.
#
# HDP_TEST_WORKERS=N runs the suite on N pytest-xdist workers (--dist loadgroup: the tests of
# the shared Spark servers, and of one module fixture, stay on one worker; tests/conftest.py);
# the default, 0, is one process: on a 2-core machine the workers were not measured faster
# on a large subset yet. The caller's own -n / -p no:xdist wins.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
.venv/bin/ruff check hdp_spark tests benchmarks scripts
.venv/bin/mypy
workers="${HDP_TEST_WORKERS:-0}"
for arg in "$@"; do
    case "$arg" in -n | -n* | --numprocesses* | no:xdist | -pno:xdist) workers=0 ;; esac
done
if [[ "$workers" != 0 ]]; then
    set -- -n "$workers" --dist loadgroup "$@"
fi
.venv/bin/python -m pytest "$@"
