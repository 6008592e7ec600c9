"""Side-by-side comparisons with the anchor libraries (PipelineDP, Tumult Analytics, OpenDP,
diffprivlib). They run from benchmark-only venvs made by ``benchmarks/setup_anchors.sh``;
``hdp_spark`` is imported from the work tree in the same process, so both sides see the
same data in the same session."""
