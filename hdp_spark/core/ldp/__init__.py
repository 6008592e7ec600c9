"""Engine-agnostic core of the local-DP aggregators (:mod:`hdp_spark.ldp`): shared constants
and checks (:mod:`.common`), the frequency oracles (:mod:`.oracle`), the specs (:mod:`.specs`),
the per-group report statistics (:mod:`.stats`), the mean and distribution estimators
(:mod:`.mean`, :mod:`.distribution`) and the driver-side release (:mod:`.release`)."""
