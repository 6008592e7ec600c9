#!/usr/bin/env bash
# The project's test command (README and CI run exactly this): lint, type-check, tests.
#
# The suite runs on two pytest-xdist workers (--dist loadgroup: the tests of the shared Spark
# servers, of the docs' default-port Connect blocks, and of one module fixture stay on one
# worker; tests/conftest.py) where the machine has at least 2 cores and 12 GB of memory
# available (two workers peaked at 14.4 GB used on a 23 GB machine), in one process otherwise. HDP_TEST_WORKERS=N sets the number (0: one process);
# the caller's own -n / -p no:xdist wins.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
.venv/bin/ruff check hdp_spark tests benchmarks scripts
.venv/bin/mypy
default_workers() {
    local cores memory_kb
    cores=$(nproc 2>/dev/null || echo 1)
    memory_kb=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo 2>/dev/null || echo 0)
    if (( cores >= 2 && ${memory_kb:-0} >= 12 * 1024 * 1024 )); then echo 2; else echo 0; fi
}
workers="${HDP_TEST_WORKERS:-$(default_workers)}"
for arg in "$@"; do
    case "$arg" in -n | -n* | --numprocesses* | no:xdist | -pno:xdist) workers=0 ;; esac
done
if [[ "$workers" != 0 ]]; then
    set -- -n "$workers" --dist loadgroup "$@"
fi
.venv/bin/python -m pytest "$@"
