"""DP partition selection with per-row ε (issue 22): release grouped statistics when the
group keys themselves are private. :mod:`.spec` holds the parameters (:class:`SelectKeys`,
:func:`select_keys`), :mod:`.mechanism` the selection, the released statistics and the
privacy argument, :mod:`.kernels` their output description inside ``agg``."""

from __future__ import annotations

from hdp_spark.core.selection.spec import NEIGHBOURS, Neighbours, SelectKeys, select_keys

__all__ = ["NEIGHBOURS", "Neighbours", "SelectKeys", "select_keys"]
