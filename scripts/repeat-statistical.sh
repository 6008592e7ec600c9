#!/usr/bin/env bash
# Run the statistical tests (pytest marker `statistical`: outcomes that depend on random draws,
# seeded or with a stated false-failure probability <= 1e-6) N times in a row, default 20, and
# print one summary line per run and the totals. Exit status 1 if any run failed.
#
#   bash scripts/repeat-statistical.sh                 # 20 runs, seeded keys (must be identical)
#   HDP_TEST_FRESH_KEYS=1 bash scripts/repeat-statistical.sh 20   # audits draw fresh OS keys
#   bash scripts/repeat-statistical.sh 5 tests/core -x # extra arguments go to pytest
#
# With HDP_TEST_FRESH_KEYS=1 the audits (tests/audit_stats.py: key, seed) use new keys on every
# run, which exercises the false-failure probabilities stated beside them.
set -uo pipefail
cd "$(dirname "$0")/.."
runs="${1:-20}"
shift || true
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
failed=0
for i in $(seq 1 "$runs"); do
    if .venv/bin/python -m pytest -m statistical -q -p no:cacheprovider "$@" >"$log" 2>&1; then
        status=ok
    else
        status=FAILED
        failed=$((failed + 1))
        grep -E "^(FAILED|ERROR)" "$log" || true
    fi
    echo "run $i/$runs: $status: $(tail -n 1 "$log")"
done
echo "statistical tests: $runs runs, $((runs - failed)) passed, $failed failed" \
     "(HDP_TEST_FRESH_KEYS=${HDP_TEST_FRESH_KEYS:-0})"
[ "$failed" -eq 0 ]
