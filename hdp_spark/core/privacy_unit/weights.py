"""Means and histograms under a privacy unit: the partition-selection mechanism (private
weights, :mod:`hdp_spark.core.selection.mechanism`) over the rows the bounding rule keeps.

Privacy-critical. Why this mechanism: with many rows per person, a group's row count and
ε histogram are no longer public facts (whether a person is in a group, and how many rows
they have there, are private), so the public-key kernels, whose weights read both, do not
apply. The selection mechanism reads neither: every statistic is divided by a noisy
weight W̃ that is itself a DP output. Over public keys (or a global release) every key is
released with its W̃, no threshold; with ``select_keys`` the threshold decides as before.

Weights. Person p (ε_p, the smallest ε of their rows) keeps at most G = ``max_groups``
groups and R = ``max_rows`` rows per group (:mod:`hdp_spark.core.privacy_unit.spec`). Each
kept row weighs k_p = ⌊⌊min(ε_p/G, c)/γ⌋ / R⌋ steps of γ (exact rationals,
:meth:`~hdp_spark.core.selection.spec.SelectKeys.units`), so p's weight in one group is at
most R·k_p·γ <= min(ε_p/G, c) and in the whole release at most G·R·k_p·γ <= ε_p.

Sensitivity (person-level neighbours: all of p's rows added, removed or replaced; the
rule keeps every other person's rows and ε unchanged). With u = 1 (add/remove) or 2
(replace) as in the selection mechanism, and s = (1 - f)/A each of A aggregators' share:

* W_g = Σ k over the kept rows of g: Σ_g |ΔW_g| <= u·G·R·k_p (the rows removed plus the
  rows added, at most G·R each), noise scale u/(f·γ): loss <= f·G·R·k_p·γ <= f·ε_p.
* a mean's N_g = Σ k·(x̄ - ½): each row moves N by at most k/2, Σ_g |ΔN_g| <= u·G·R·k_p/2,
  scale u/(2·s·γ): loss <= s·G·R·k_p·γ.
* a histogram's C_gj = Σ_{x = j} k: each row moves one bin by k, Σ |ΔC| <= u·G·R·k_p,
  scale u/(s·γ) per bin: loss <= s·G·R·k_p·γ.

Total (f + A·s)·G·R·k_p·γ <= ε_p: pure ε_p-DP per person over public keys. With
``select_keys`` add δ: a group that exists on one side only holds p alone, so its weight
is at most R·k_p <= K_c and it is released with probability <= δ/G (the threshold's margin
is computed for δ/G); p is alone in at most G groups on each side, δ in total. Each kept
(person, group) pair spends ε_p/G — the public bound, never the person's actual number of
groups.

Intervals: as under partition selection (n and the ε histogram are private), ``ci_*`` are
the whole range and ``noise_ci_*`` hold the weighted statistic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.privacy_unit.spec import PrivacyUnit
from hdp_spark.core.selection.mechanism import Key, Selected, group_weight, noisy_weights
from hdp_spark.core.selection.spec import Neighbours, SelectKeys
from hdp_spark.core.stats import GroupStats
from hdp_spark.core.validation import number
from hdp_spark.errors import ParameterError

__all__ = ["DEFAULT_EPS_CAP", "DEFAULT_WEIGHT_SHARE", "person_charge", "unit_selection",
           "weigh_public"]

DEFAULT_EPS_CAP = 1.0
"""c over public keys unless the caller sets ``eps_cap``: the most ε one (person, group)
pair spends (a person with ε_p/max_groups above it leaves the rest unspent)."""

DEFAULT_WEIGHT_SHARE = 0.25
"""f over public keys unless the caller sets ``weight_share``: the share of each person's
ε spent on the noisy weight W̃ that every statistic divides by."""


def unit_selection(
    unit: PrivacyUnit,
    keys: object,
    *,
    eps_cap: float | None = None,
    weight_share: float | None = None,
    neighbours: Neighbours = "replace",
) -> SelectKeys:
    """The mechanism's parameters for a release under ``unit``: ``keys`` a
    :class:`SelectKeys` (its δ, c, f, γ and neighbours, with the unit's bounds) or public
    keys / None (``eps_cap`` and ``weight_share``, or their defaults; no δ).

    Raises:
        ParameterError: ``eps_cap``/``weight_share`` given with ``select_keys`` (it has its
            own ``c`` and ``share``), or out of range.

    Privacy:
        Public parameters only.
    """
    if isinstance(keys, SelectKeys):
        if eps_cap is not None or weight_share is not None:
            msg = ("`eps_cap` and `weight_share` are select_keys(c=..., share=...) when keys "
                   "are selected; pass them there.")
            raise ParameterError(msg)
        return SelectKeys(keys.delta, keys.c, keys.share, keys.step, keys.neighbours,
                          max_groups=unit.max_groups, max_rows=unit.max_rows)
    c = DEFAULT_EPS_CAP if eps_cap is None else number("eps_cap", eps_cap)
    f = DEFAULT_WEIGHT_SHARE if weight_share is None else number("weight_share", weight_share)
    try:
        return SelectKeys(0.0, c, f, None, neighbours, max_groups=unit.max_groups,
                          max_rows=unit.max_rows, keys_public=True)
    except ParameterError as err:  # the mechanism's names c and share: name the caller's
        msg = str(err).replace("`c`", "`eps_cap`").replace("`share`", "`weight_share`")
        raise ParameterError(msg) from None


def weigh_public(selection: SelectKeys, table: Mapping[Key, GroupStats], key: ReleaseKey,
                 parts: int, order: Sequence[Key]) -> dict[Key, Selected]:
    """Every public key's noisy weight W̃ (a key without rows has W = 0), in ``order``.

    Privacy:
        Step one of the module docstring: W̃ = W + Z per key from the key's own stream;
        every key is released, so no decision reads the data.
    """
    weights = [group_weight(selection, [r.level for r in stats.rows],
                            [r.count for r in stats.rows])
               if (stats := table.get(k)) is not None else 0 for k in order]
    noisy = noisy_weights(selection, weights, key, list(order))
    return {k: Selected(selection, w, parts) for k, w in zip(order, noisy, strict=True)}


def person_charge(selection: SelectKeys, level: float) -> float:
    """What one release spends of a person whose ε is ``level``: G·R·k·γ, the bound of the
    module docstring (<= min(level, G·c)); a negative level (invalid ε: refused before
    anything is charged) gets the largest charge, never less.

    Privacy:
        A function of the person's ε and the public parameters only: never of how many
        rows or groups the person has, so the charge reveals nothing more.
    """
    bound = selection.max_groups * selection.max_rows
    if not level >= 0:
        return float(selection.gamma * bound * (selection.cap_units // selection.max_rows))
    return float(selection.gamma * bound * selection.units(float(level)))
