"""The privacy unit of the Spark Column aggregators: ``hdp_mean(..., privacy_unit="user_id",
max_groups=3, max_rows=10)`` in ``df.agg`` or ``df.groupBy(...).agg`` with
``keys="public"``, a public key list or ``keys=select_keys(...)``.

Privacy-critical. The Column releases what ``hs.agg(df, ..., privacy_unit=...)`` releases
under the query's key (:meth:`~hdp_spark.core.noise.ReleaseKey.for_query`): the rows the
bounding rule of :mod:`hdp_spark.core.privacy_unit.spec` keeps, each person's ε the smallest
of their rows, and the private-weight mechanism of
:mod:`hdp_spark.core.privacy_unit.weights` (every group's noisy weight W̃; a threshold
only under ``select_keys``).

How. The Column is a partition-selection Column (``column_selection``) whose group decision
carries the unit: ``select:<the mechanism's parameters, the unit's column, whether the
grouping values are declared public>#<the Column's bounding key>``. At analysis the JVM
extension (``UnitPlan``) inserts the bounding below the aggregate as the release API's
streaming operator (``HdpUnitBound``: one shuffle by person, one sort; planned by the
strategy the extension injects, on classic Spark and Spark Connect; native windows where
the session sets ``hdp_spark.unitOperator`` to false), with the ranks of the query's
bounding key (:func:`~hdp_spark.core.privacy_unit.spec.query_bounding_key` of the Column's
bounding key and the query's fingerprint), and makes the aggregate read ε_person; the
finalizes are the selection Column's, W̃ drawn for every group (no threshold over public
keys).

Under ``keys="public"`` a group's position in the rank texts is its place among the groups
found, in ascending order: the release API's position of that group in ``keys=`` given the
sorted list of the same groups. The declaration makes that list public, as it makes every
group found public; so every group found gets an output row, even one whose persons all
kept other groups (``UnitKeys.withEveryGroup``: one row at ε 0 per group found, weight 0),
as ``agg`` releases every key of that list: whether a group kept rows is a function of
its persons' rows and must not decide whether it is published.

Under a public key list (``keys=[...]``) a group's position is its index in the list (as
``agg`` normalizes it), a row of any other key (or a null or NaN one) takes no group and
counts for its person's ε only, and EVERY listed key gets an output row, found in the data
or not: which keys hold kept rows is private under a unit (a person's presence), so an
output row per group found would publish it. ``UnitPlan`` adds one row per key below the
aggregate, after the bounding, at ε 0 (weight 0: it moves no W, N or C, the only inputs
of the noise and the outputs, so the row's W̃ and estimates are ``agg``'s for a key without
rows). Privacy: positions come from the public list, never from other persons' rows, so a
person's kept rows are functions of their own rows and the key (the bounding rule's
argument); the output's set of groups is the public list.

Under ``keys=select_keys(...)`` a group enters the rank texts as its canonical text (each
grouping value, an integer in decimal or a string as it is, length-prefixed: ``agg``'s
:func:`~hdp_spark.core.privacy_unit.spec.group_key_text`), never as its place among the
groups found; a row with a null grouping value counts for its person's ε only; the
finalizes apply the threshold T (margin for δ/max_groups) to each group's W̃, as ``agg``.
The grouping columns must hold integers or strings (refused at analysis otherwise).
"""

from __future__ import annotations

import json

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.privacy_unit.spec import PrivacyUnit, bounding_key
from hdp_spark.core.privacy_unit.weights import unit_selection
from hdp_spark.core.selection.spec import SelectKeys
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
            ``"public"``, a public key list, ``select_keys`` or None under one, ``eps_cap``
            or ``weight_share`` beside ``select_keys``, or bad bounds (naming the
            parameter).

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
    listed: list[list[object]] | None = None
    if isinstance(keys, str) and keys != "public":
        msg = ("`keys` of a Column aggregator under `privacy_unit` must be 'public' (the "
               "grouping values are public), a public key list, select_keys(...) or "
               f"omitted (a global aggregate), got {keys!r}.")
        raise ParameterError(msg)
    if isinstance(keys, SelectKeys):
        return _select_decision(keys, privacy_unit, max_groups, max_rows, eps_cap,
                                weight_share)
    if keys is not None and not isinstance(keys, str):
        from hdp_spark.spark.columns import key_list  # columns imports this module

        listed = key_list(keys)
    unit = PrivacyUnit(privacy_unit, 1 if max_groups is None else max_groups,
                       1 if max_rows is None else max_rows)
    selection = unit_selection(unit, None, eps_cap=eps_cap, weight_share=weight_share)
    params: dict[str, object] = {
        "delta": 0.0, "c": selection.c, "share": selection.share, "step": None,
        "neighbours": selection.neighbours, "max_groups": unit.max_groups,
        "max_rows": unit.max_rows, "keys_public": True, "unit": unit.column,
        "public": keys == "public"}
    if listed is not None:
        # the group's position in the rank texts is its index in this (normalized) list,
        # agg's under keys=<the same list>; every key gets a row (UnitPlan)
        params["keys"] = listed
    return SELECT_PREFIX + json.dumps(params, allow_nan=False, sort_keys=True)


def _select_decision(keys: SelectKeys, privacy_unit: str, max_groups: int | None,
                     max_rows: int | None, eps_cap: float | None,
                     weight_share: float | None) -> str:
    """The decision of ``select_keys`` under a unit: the selection's parameters with the
    unit's bounds (``keys_public`` false: the threshold decides), as ``agg`` builds them
    (:func:`~hdp_spark.core.privacy_unit.weights.unit_selection`, which refuses
    ``eps_cap``/``weight_share`` beside it).

    Privacy:
        Public parameters only. A group enters the ranks as its canonical text
        (:func:`~hdp_spark.core.privacy_unit.spec.group_key_text`, ``UnitPlan``), a function
        of its own values, so a person's kept rows never depend on other persons' rows;
        a group holding one person alone is released with probability <= δ/max_groups.
    """
    unit = PrivacyUnit(privacy_unit, 1 if max_groups is None else max_groups,
                       1 if max_rows is None else max_rows)
    sel = unit_selection(unit, keys, eps_cap=eps_cap, weight_share=weight_share)
    params = {"delta": sel.delta, "c": sel.c, "share": sel.share, "step": sel.step,
              "neighbours": sel.neighbours, "max_groups": unit.max_groups,
              "max_rows": unit.max_rows, "keys_public": False, "unit": unit.column,
              "public": False}
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
