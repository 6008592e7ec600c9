"""``python -m hdp_spark.jobs run jobs/<job>.toml``: see :mod:`hdp_spark.cli`."""

from __future__ import annotations

from hdp_spark.cli import main

if __name__ == "__main__":
    raise SystemExit(main(prog="python -m hdp_spark.jobs"))
