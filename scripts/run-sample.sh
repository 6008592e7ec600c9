#!/usr/bin/env bash
# The project's main job: a scheduled release on the bundled sample table (pandas engine).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
.venv/bin/python examples/sample_release.py "$@"
