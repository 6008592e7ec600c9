"""The privacy unit: many rows per person, bounded before any statistic is computed.

See :mod:`hdp_spark.core.privacy_unit.spec` for the rule and its argument. The engines
implement the rule natively (:mod:`hdp_spark.pandas.privacy_unit`,
:mod:`hdp_spark.spark.privacy_unit`).
"""

from hdp_spark.core.privacy_unit.spec import (
    MAX_GROUPS_LIMIT,
    MAX_ROWS_LIMIT,
    PrivacyUnit,
    bounding_key,
    group_rank_text,
    rank,
    report_rank_text,
    row_rank_text,
)

__all__ = [
    "MAX_GROUPS_LIMIT",
    "MAX_ROWS_LIMIT",
    "PrivacyUnit",
    "bounding_key",
    "group_rank_text",
    "rank",
    "report_rank_text",
    "row_rank_text",
]
