#!/usr/bin/env bash
# The project's main job: a scheduled release on the bundled sample table (pandas engine),
# with schema validation, a per-user privacy ledger, outputs and a report under out/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
.venv/bin/python -m hdp_spark.jobs run jobs/sample_employees.toml "$@"
