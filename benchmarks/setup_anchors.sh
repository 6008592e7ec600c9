#!/usr/bin/env bash
# Create the benchmark-only venvs of the anchor libraries (never hdp_spark's runtime deps).
#
#   benchmarks/.venv-anchors  Python 3.11: PipelineDP + PySpark 4.3, OpenDP, diffprivlib
#   benchmarks/.venv-tmlt     Python 3.12: Tumult Analytics 0.21 (needs 3.12 for PySpark 4)
#
# Usage: bash benchmarks/setup_anchors.sh [anchors|tmlt|all]   (default: all)
# Interpreters: $PY311 / $PY312, else python3.11 / python3.12 on PATH, else pyenv's.
# Each venv carries its own `.gitignore` (`*`); re-running the script reuses them.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
req="$here/requirements-anchors.txt"
what="${1:-all}"

find_python() {  # $1 = "3.11" or "3.12"; prints an interpreter path or nothing
    local version="$1" var="PY${1/./}" candidate
    if [[ -n "${!var:-}" ]]; then echo "${!var}"; return; fi
    for candidate in "python$version" "$HOME/.pyenv/versions/$version"*/bin/python"$version" \
        "/usr/bin/python$version" "/usr/local/bin/python$version"; do
        if command -v "$candidate" >/dev/null 2>&1 \
            && "$candidate" -c "import sys; assert sys.version_info[:2] == tuple(map(int, '$version'.split('.')))" 2>/dev/null; then
            command -v "$candidate"
            return
        fi
    done
}

make_venv() {  # $1 = venv dir, $2 = python version
    local dir="$1" version="$2" py
    py="$(find_python "$version")"
    if [[ -z "$py" ]]; then
        echo "setup_anchors: no Python $version found (tried \$PY${version/./}, python$version," \
             "pyenv, /usr/bin, /usr/local/bin); skipping $dir" >&2
        return 1
    fi
    echo "setup_anchors: $dir with $py"
    [[ -x "$dir/bin/python" ]] || "$py" -m venv "$dir"
    # keep the venv out of git even where .gitignore does not list it (as Python 3.13's venv does)
    echo '*' > "$dir/.gitignore"
    "$dir/bin/python" -m pip install --quiet --upgrade pip
    "$dir/bin/python" -m pip install --quiet -r "$req"
    "$dir/bin/python" -m pip freeze > "$dir/freeze.txt"
    echo "setup_anchors: $dir ready ($(wc -l < "$dir/freeze.txt") packages, see $dir/freeze.txt)"
}

status=0
if [[ "$what" == "all" || "$what" == "anchors" ]]; then
    make_venv "$here/.venv-anchors" 3.11 || status=1
    "$here/.venv-anchors/bin/python" -c "import pipeline_dp, pydp, diffprivlib, opendp, polars, pyspark; print('anchors venv: imports ok')" || status=1
fi
if [[ "$what" == "all" || "$what" == "tmlt" ]]; then
    if make_venv "$here/.venv-tmlt" 3.12; then
        "$here/.venv-tmlt/bin/python" -c "import tmlt.analytics, pyspark; print('tmlt venv: imports ok')" || status=1
    else
        status=1
    fi
fi
exit "$status"
