"""``python -m hdp_spark.spark.jvm``: the install step. Compiles the JVM extension and trains
the class-data-sharing archive of Spark's classes (:mod:`hdp_spark.spark.jvm.cds`); prints
the path of each file it built, one a line. An archive that cannot be trained is reported
on stderr and skipped: sessions then start without it."""

import sys

from hdp_spark.spark.jvm import build, spark_jars
from hdp_spark.spark.jvm.cds import CdsBuildError, build_archive

jar = build()
print(jar)
try:
    print(build_archive(jar, spark_jars()))
except CdsBuildError as exc:
    print(f"hdp_spark: no class-data-sharing archive (Spark sessions start without it): {exc}",
          file=sys.stderr)
