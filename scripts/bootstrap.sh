#!/usr/bin/env bash
# Create .venv (Python >= 3.11) and install hdp_spark with its development extras.
# Idempotent: re-running only reinstalls when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.hdp_spark-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  log=.venv/install.log
  echo "installing hdp_spark and its dependencies into .venv (log: $log) ..." >&2
  if ! { .venv/bin/python -m pip install --upgrade pip && \
         .venv/bin/python -m pip install -e ".[dev]"; } >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    exit 1
  fi
  touch "$stamp"
fi
# The JVM extension of the Column aggregators: compiled from its Java sources with javac
# against the installed pyspark's jars (no network), then the class-data-sharing archive of
# Spark's classes that local sessions start with (a ~1-2 minute training session; see
# hdp_spark/spark/jvm/cds.py). Rebuilt only when sources changed.
# Checked without Python when nothing changed since the last build (that check imports
# pyspark: ~2 s of CPU on every run of the sample job): the stamp names the files it built
# (the jar, the archive), each still there, and is older than neither the install stamp nor
# any Java source or Python module of hdp_spark/spark/jvm (the build and the training).
jvm_stamp=.venv/.hdp_spark-jvm-built
built() {
  [ -s "$jvm_stamp" ] || return 1
  local f
  while IFS= read -r f; do [ -f "$f" ] || return 1; done < "$jvm_stamp"
}
if [ -f "$jvm_stamp" ] && [ "$jvm_stamp" -nt "$stamp" ] && built \
   && [ -z "$(find hdp_spark/spark/jvm \( -name '*.java' -o -name '*.py' \) -newer "$jvm_stamp" \
              -print -quit)" ]; then
  :
elif command -v javac >/dev/null 2>&1 || [ -n "${JAVA_HOME:-}" ]; then
  .venv/bin/python -m hdp_spark.spark.jvm > "$jvm_stamp.part"
  mv "$jvm_stamp.part" "$jvm_stamp"
else
  echo "no javac: the Spark Column aggregators will be unavailable (the release API works)" >&2
fi
