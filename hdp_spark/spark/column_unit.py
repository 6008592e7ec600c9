"""The privacy unit of the Spark Column aggregators: ``hdp_mean(..., privacy_unit="user_id",
max_groups=3, max_rows=10)`` in ``df.agg`` or ``df.groupBy(...).agg`` with
``keys="public"``.

Privacy-critical. The Column releases what ``hs.agg(df, ..., privacy_unit=...)`` releases
under the query's key (:meth:`~hdp_spark.core.noise.ReleaseKey.for_query`): the rows the
bounding rule of :mod:`hdp_spark.core.privacy_unit.spec` keeps, each person's ε the smallest
of their rows, and the private-weight mechanism of
:mod:`hdp_spark.core.privacy_unit.weights` (every group's noisy weight W̃, no threshold).

How. The Column is a partition-selection Column (``column_selection``) whose group decision
carries the unit: ``select:<the mechanism's parameters, the unit's column, whether the
grouping values are declared public>#<the Column's bounding key>``. At analysis the JVM
extension (``UnitPlan``) inserts the bounding below the aggregate in native windows (one
shuffle by person, one sort), with the ranks of the query's bounding key
(:func:`~hdp_spark.core.privacy_unit.spec.query_bounding_key` of the Column's bounding key
and the query's fingerprint), and makes the aggregate read ε_person; the finalizes are the
selection Column's, W̃ drawn for every group (no threshold over public keys).

Under ``keys="public"`` a group's position in the rank texts is its place among the groups
found, in ascending order: the release API's position of that group in ``keys=`` given the
sorted list of the same groups. The declaration makes that list public, as it makes every
group found public.
"""

from __future__ import annotations

import json

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.privacy_unit.spec import PrivacyUnit, bounding_key
from hdp_spark.core.privacy_unit.weights import unit_selection
from hdp_spark.errors import ParameterError
from hdp_spark.spark.column_selection import SELECT_PREFIX, unkeyed

__all__ = ["UNIT_CONF", "keyed_decision", "unit_conf", "unit_decision"]

UNIT_CONF = "hdp_spark.sql.unit"
"""The session conf where :func:`unit_conf` goes for the SQL form (``SqlOptions``)."""


def unit_decision(
    keys: object,
    privacy_unit: str | None,
    max_groups: int | None,
    max_rows: int | None,
    eps_cap: float | None,
    weight_share: float | None,
) -> str | None:
    """The group decision of a Column under ``privacy_unit`` (None: no unit), without its
    bounding key (:func:`keyed_decision` adds it with the Column's key).

    Raises:
        ParameterError: a unit option without ``privacy_unit``, ``keys`` other than
            ``"public"`` or None under one, or bad bounds (naming the parameter).

    Privacy:
        Public parameters only.
    """
    if privacy_unit is None:
        given = {"max_groups": max_groups, "max_rows": max_rows, "eps_cap": eps_cap,
                 "weight_share": weight_share}
        for name, value in given.items():
            if value is not None:
                msg = f"`{name}` sets the privacy unit's mechanism: it needs `privacy_unit`."
                raise ParameterError(msg)
        return None
    if keys is not None and not (isinstance(keys, str) and keys == "public"):
        msg = ("`keys` of a Column aggregator under `privacy_unit` must be 'public' (the "
               "grouping values are public) or omitted (a global aggregate), got "
               f"{type(keys).__name__ if not isinstance(keys, str) else repr(keys)}; key "
               "lists go through the release API: hs.agg(df, ..., by=..., keys=[...], "
               "privacy_unit=...).")
        raise ParameterError(msg)
    unit = PrivacyUnit(privacy_unit, 1 if max_groups is None else max_groups,
                       1 if max_rows is None else max_rows)
    selection = unit_selection(unit, None, eps_cap=eps_cap, weight_share=weight_share)
    params = {"delta": 0.0, "c": selection.c, "share": selection.share, "step": None,
              "neighbours": selection.neighbours, "max_groups": unit.max_groups,
              "max_rows": unit.max_rows, "keys_public": True, "unit": unit.column,
              "public": keys == "public"}
    return SELECT_PREFIX + json.dumps(params, allow_nan=False, sort_keys=True)


def keyed_decision(groups: str, key: ReleaseKey) -> str:
    """``groups`` with the bounding key of ``key`` when it carries a privacy unit (any
    earlier bounding key replaced: a Column re-keyed by ``unsafe_seed``), else as it is.

    Privacy:
        The bounding key is not a secret (it orders rows, keys no noise).
    """
    if not groups.startswith(SELECT_PREFIX):
        return groups
    head = unkeyed(groups)
    if '"unit"' not in head:
        return groups
    return f"{head}#{bounding_key(key)}"


def unit_conf(key: ReleaseKey) -> str:
    """What ``register_sql`` tells the SQL functions for ``'unit', column, max_groups,
    max_rows``: the mechanism's public defaults (``eps_cap``, ``weight_share``) and the
    registration's bounding key, as JSON (the extension completes the decision as
    :func:`unit_decision` writes it).

    Privacy:
        Public parameters and the bounding key (not a secret: it orders rows).
    """
    selection = unit_selection(PrivacyUnit("unit"), None)
    return json.dumps({"delta": 0.0, "c": selection.c, "share": selection.share,
                       "step": None, "neighbours": selection.neighbours,
                       "keys_public": True, "bkey": bounding_key(key)},
                      allow_nan=False, sort_keys=True)
