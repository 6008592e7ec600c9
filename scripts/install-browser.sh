#!/usr/bin/env bash
# Best effort: install Chromium from the system packages for the HTML report's browser test
# (tests/jobs/test_report_browser.py skips, saying why, where no browser is installed).
# Needs root and apt-get; never fails the caller.
set -uo pipefail
for b in chromium chromium-browser google-chrome google-chrome-stable; do
  if command -v "$b" >/dev/null 2>&1; then exit 0; fi
done
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-browser: not root or no apt-get; the browser test will be skipped" >&2
  exit 0
fi
echo "install-browser: installing chromium (system package) ..." >&2
if ! { apt-get update -q && \
       DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium; \
     } >/tmp/hdp_spark-install-browser.log 2>&1; then
  tail -n 20 /tmp/hdp_spark-install-browser.log >&2
  echo "install-browser: failed; the browser test will be skipped" >&2
fi
exit 0
