"""``python -m hdp_spark.spark.jvm``: compile the JVM extension (the install step)."""

from hdp_spark.spark.jvm import build

print(build())
