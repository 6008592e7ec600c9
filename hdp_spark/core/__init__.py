"""Engine-agnostic core: imports neither pyspark nor pandas."""
