"""``agg``, ``release`` and ``explain``: the release API, written once for every engine.

Each is ``f(engine, *specs, ...)`` over a core :class:`~hdp_spark.core.pipeline.Engine`;
the backends bind them to their DataFrames (:mod:`hdp_spark.front.bind`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hdp_spark.core.kernels import ReleaseResult, mean_release, release_specs
from hdp_spark.core.keys import normalize_by
from hdp_spark.core.pipeline import Engine
from hdp_spark.core.privacy_unit.ldp import check_ldp_unit, is_ldp_release
from hdp_spark.core.privacy_unit.options import UnitOptions
from hdp_spark.core.privacy_unit.spec import PrivacyUnit
from hdp_spark.core.schema import TableSchema
from hdp_spark.errors import ParameterError
from hdp_spark.explain import explain_hook
from hdp_spark.explain_unit import explain_unit
from hdp_spark.front import spec_of
from hdp_spark.front.explain_hooks import explain_ldp_unit

__all__ = ["agg", "explain", "release"]


def release(
    engine: Engine,
    *specs: Any,
    by: str | Sequence[str] | None = None,
    keys: Any = None,
    unsafe_seed: int | str | bytes | None = None,
    schema: TableSchema | None = None,
) -> ReleaseResult:
    """Run one release of means; the engine-neutral result (:class:`ReleaseResult`).

    See :func:`agg` for the arguments (means only).

    Privacy:
        One release, exactly as :func:`agg` (fresh noise unless ``unsafe_seed``).
    """
    return mean_release(engine, tuple(spec_of(s) for s in specs), by=by, keys=keys,
                        schema=schema, unsafe_seed=unsafe_seed)


def agg(
    engine: Engine,
    *specs: Any,
    by: str | Sequence[str] | None = None,
    keys: Any = None,
    unsafe_seed: int | str | bytes | None = None,
    schema: TableSchema | None = None,
    privacy_unit: str | None = None,
    max_groups: int = 1,
    max_rows: int = 1,
    eps_cap: float | None = None,
    weight_share: float | None = None,
) -> Any:
    """Release heterogeneous-DP aggregates of a DataFrame, any mix in one call.

    Args:
        df: the input table (ε column included): a pandas DataFrame for
            :mod:`hdp_spark.pandas`, a Spark (classic or Connect) DataFrame for
            :mod:`hdp_spark.spark`.
        *specs: aggregators with unique names: ``hdp_mean``, ``hdp_histogram``,
            ``hdp_user_mean``, ``hdp_heavy_hitters`` (global only: no ``by``; at most one
            per call), ``ldp_mean``, ``ldp_mean_vector``, ``ldp_distribution`` (their
            report columns must carry the ``ldp_simulate`` marker; unmarked device
            reports go through ``ldp_agg(..., already_randomized=True)``).
        by: optional group-by column(s), public grouping attributes only: a column a
            spec reads as data (value, category, report or user id column) or as its ε
            column is refused, as grouping by it would publish exact per-value counts
            through ``_n``.
        keys: the public key set of a grouped release (list of values, list of tuples for
            several ``by`` columns, or a DataFrame with the ``by`` columns). Every key gets
            a row; rows with other keys are left out. On Spark ``keys`` may also be a
            Spark (classic or Connect) DataFrame of public keys.
            KEY SETS MUST BE PUBLIC INPUTS FROM OUTSIDE THE DATA (a catalogue, a calendar,
            a reference table): a key set computed from the released table, such as its
            distinct values, reveals which keys occur whatever noise is added. Keys that are
            detectably derived from ``df`` (the same object, a view sharing its memory, or
            on Spark a DataFrame whose plan contains ``df``'s) are refused; a list collected
            from the data cannot be detected and is the caller's responsibility. Ordered
            containers keep their order in the output; a set is sorted.
            When the keys are private, pass ``select_keys(delta=..., c=..., share=...)``
            instead (``hdp_mean`` and ``hdp_histogram`` on one ε column): DP partition
            selection with per-row ε releases only the groups whose noisy Σ min(ε_i, c)
            reaches a threshold, sorted, each row charged (min(ε_i, c), δ); see
            docs/partition_selection.md. Under selection the weights are min(ε_i, c)
            (``method`` is not used) and the outputs hold no ``_n`` or ε histogram;
            ``_ci_low``/``_ci_high`` are the whole range (nothing public bounds the
            ε-weighting when n is private) and ``_noise_ci_low``/``_noise_ci_high`` the
            noise's interval of the κ-weighted mean.
        unsafe_seed: reproducible noise for tests and examples. UNSAFE in production:
            anyone who knows the seed can remove the noise.
        schema: optional :class:`~hdp_spark.schema.TableSchema` of ``df``. When given, the
            release first checks that it reads declared columns only, then counts the
            schema's blocking rules (ε column, user id column, row count: public inputs) and
            raises before any statistic, noise or result exists; value rules never block
            (see docs/bad_input.md). ``None`` (default) skips this step.
        privacy_unit: the column that identifies a person (integers or strings). Without
            it **one row is one person**. With it, every row with the same id is one person:
            their ε is the smallest of their rows' ε, they contribute at most ``max_rows``
            rows to each of at most ``max_groups`` groups (kept by the release's keyed
            PRF), and each kept (person, group) pair spends ε/``max_groups``; a person's
            loss over the release is at most their ε, whatever their number of rows. The
            statistics then use private weights (as under ``select_keys``: ``_weight``,
            ``_ci_*`` the whole range, ``_noise_ci_*``; no ``_n``). ``hdp_mean`` and
            ``hdp_histogram``, global or over public ``keys``, so far; and the local-DP
            aggregators, global only and alone in the call, which read ONE report per
            person (the bounds stay 1; see ``ldp_agg``); see docs/privacy_unit.md.
        max_groups, max_rows: the privacy unit's public contribution bounds (>= 1).
        eps_cap: under ``privacy_unit``, the most ε one (person, group) pair spends
            (default 1.0): a person whose ε/``max_groups`` exceeds it leaves the rest unspent.
        weight_share: under ``privacy_unit``, the share of each person's ε spent on the
            noisy weight every statistic divides by (default 0.25).

    Returns:
        A DataFrame of the backend's engine, materialized: one row per group (one row
        for a global release): the group columns, then each aggregator's fields
        prefixed by its name (documented in its constructor). A
        histogram publishes its bins as one list-of-struct column ``<name>`` (category,
        frequency, ci_low, ci_high, count, count_ci_low, count_ci_high) plus its scalar
        fields; heavy hitters one list-of-struct column of the released keys.

    Privacy:
        Each call is one release with one fresh key: every aggregator's noise is bound to
        its kind, its name (unique per call) and the group, so no two share a stream; the
        call spends the sum of the aggregators' budgets. The returned frame is
        materialized: reading it again never redraws noise. What each aggregator protects
        and what is public is documented in its constructor.
    """
    unit = _unit_options(privacy_unit, max_groups, max_rows, eps_cap, weight_share)
    return release_specs(engine, tuple(spec_of(s) for s in specs), by=by, keys=keys,
                         schema=schema, unsafe_seed=unsafe_seed, unit=unit
                         ).materialize(engine)


def _unit_options(privacy_unit: str | None, max_groups: int, max_rows: int,
                 eps_cap: float | None, weight_share: float | None) -> UnitOptions | None:
    """``agg``'s privacy-unit keywords as :class:`UnitOptions` (None without a unit).

    Raises:
        ParameterError: a bound or option given without ``privacy_unit``, or invalid.
    """
    if privacy_unit is None:
        given = [name for name, value, default in (
            ("max_groups", max_groups, 1), ("max_rows", max_rows, 1),
            ("eps_cap", eps_cap, None), ("weight_share", weight_share, None))
            if value is not default and value != default]
        if given:
            msg = f"`{given[0]}` bounds a privacy unit: it needs `privacy_unit`, got None."
            raise ParameterError(msg)
        return None
    return UnitOptions(PrivacyUnit(privacy_unit, max_groups, max_rows), eps_cap, weight_share)


def explain(
    engine: Engine,
    *specs: Any,
    by: str | Sequence[str] | None = None,
    keys: Any = None,
    privacy_unit: str | None = None,
    max_groups: int = 1,
    max_rows: int = 1,
    eps_cap: float | None = None,
    weight_share: float | None = None,
) -> Any:
    """The accuracy and per-row privacy of a release of ``specs``, before spending anything.

    Args:
        df: the input table (pandas or Spark, as in :func:`agg`); only its ε column(s),
            the ``by`` columns and, for user-level means, the user id column are read.
        *specs: ``hdp_mean`` and ``hdp_histogram`` aggregators with unique names, or
            scalar local-DP means (:func:`hdp_spark.ldp.ldp_mean`), or user-level means
            (:func:`hdp_spark.hdp_user_mean`); each of the last two not mixed with the
            others. Heavy hitters are not explained yet.
        by: optional group-by column(s), as in :func:`agg`.
        keys: the public key set of a grouped release, as in :func:`agg`.
        privacy_unit, max_groups, max_rows, eps_cap, weight_share: as in :func:`agg`;
            with ``privacy_unit`` the explanation reads no column (below).

    Returns:
        One row per (group, aggregator): the group columns, then ``aggregator`` (its
        output name), ``kind`` (``mean``/``histogram``), ``method``, ``n``, ``beta``,
        ``eps_levels`` (per ε level: eps, n, weight, eps_effective), ``tau``,
        ``noise_scale``, ``half_width`` (the half-width of the released (1 - β) interval
        before clipping to the output range: ``noise_half_width`` (the noise's) +
        ``bias_bound`` (the worst-case effect of weighting rows by their ε, the release's
        ``_bias_bound``); half the range on a fallback), ``fallback``,
        ``baseline_half_width`` (a single-ε library with every row at the group's
        smallest positive ε, as in the report; null without a private row) and
        ``free_rows`` (rows whose eps_effective is below their ε). ``eps_levels``,
        ``tau``, ``noise_scale``, ``bias_bound``, ``fallback`` and ``n`` equal the columns
        ``agg`` then
        publishes for the same table, specs and keys, and its intervals are the estimate
        ± ``half_width`` clipped to the output range. ``half_width_is_bound`` is False for
        them (an exact quantile of the noise).

        Local-DP means (kind ``ldp_mean``, method = the mechanism): the reports carry
        their noise already, so ``noise_scale`` is 0, ``tau`` NaN, ``eps_effective`` the
        level's ε and ``free_rows`` 0; ``noise_half_width`` is the release's
        ``_radius``, the paper's (1 - β) concentration bound (``half_width_is_bound``
        True), ``bias_bound`` its ``_bias_bound`` and ``half_width`` their sum;
        ``baseline_half_width`` is that radius with every report at the group's smallest
        ε. ``n``, ``eps_levels`` (eps, n, weight), ``half_width`` and ``fallback`` equal
        what ``ldp_agg`` reports when every report is usable (a missing or malformed
        report is skipped by the release: its n is then smaller). The report columns
        are never read: the aggregation runs on the ε and group columns with one
        constant report per row. Under ``privacy_unit`` (global only, as ``ldp_agg``)
        the same columns describe the one report per person the release reads: ``n``
        counts persons and ``eps_levels`` holds each person once at their smallest ε
        (the id and ε columns are read; both are public in that model).

        User-level means (kind ``user_mean``, method = the cap) have their own columns:
        ``users``, ``rows``, ``users_var``, ``users_initial``, ``users_final``,
        ``users_excluded``, ``beta``, ``eps_var``, ``eps_initial``, ``eps_final``,
        ``classes``, ``initial_noise_scale``, ``initial_error``, ``noise_scale``,
        ``half_width``, ``fallback``, ``half_width_is_bound``: the group sizes, the
        variance and initial steps (and fallback) exactly as ``user_mean`` then reports
        them; the final step's noise scale and half-width as upper bounds (the step
        depends on the released first estimates): bounds of ``_noise_scale`` and of the
        ``_noise_ci_low``/``_noise_ci_high`` half-width, not of ``_ci_low``/``_ci_high``,
        which add the ``_bias_bound`` the first steps fix. Only the user id, ε and group columns
        are read (``docs/user_mean.md``, "Explain").

        Under ``privacy_unit`` (``hdp_mean``/``hdp_histogram``; kind as above, method
        ``unit``) a group's n and ε histogram are private, so no column is read and each
        row holds public figures (:mod:`hdp_spark.explain_unit`): ``beta``,
        ``max_groups``, ``max_rows``, ``eps_cap``, ``weight_share``,
        ``weight_noise_scale`` and ``weight_half_width`` (the noisy weight W̃'s Laplace
        scale and (1 - β/2) half-width, ε units), ``noise_scale`` and
        ``noise_half_width`` (the statistic's: a mean's numerator in ε × data units, a bin
        count in ε units), ``bias_bound`` (the whole range: ``ci_low``/``ci_high`` are the
        range) and ``half_width_at`` (per public group weight W of
        :data:`~hdp_spark.explain_unit.WEIGHT_LADDER`: a (1 - β) bound of the released
        noise interval's half-width, output units). W ≈ the number of persons in a group
        when each has ε >= max_groups × eps_cap and max_rows rows there. With
        ``keys=select_keys(...)`` as well no group is named (one row per aggregator, no
        group column) and ``delta``, ``threshold``, ``margin`` (ε units) and
        ``release_probability_at`` (per ladder weight: the exact chance of release) are
        added.

    Engines:
        On Spark, one job per ε column and grid (``groupBy(by..., ε level).count()``, no
        value column); the result is a DataFrame built from local rows, like :func:`agg`.

    Privacy:
        Spends no budget, draws no noise and writes nothing. Under ``privacy_unit``: no
        pass at all (the output is a function of the specs, bounds and public keys);
        for local-DP means, one pass over the id and ε columns (the persons' ε
        histogram, public in the local model under a unit).
        Otherwise one counts-only pass: rows
        per (group, ε level), read from the ε and group columns only (public in this
        model); no value or category column is read, so two tables that differ only in
        their values give the same plan. The output is a function of the public ε
        histograms, the specs and the public key set, and may be shared like the ε
        histogram itself.
    """
    specs = tuple(spec_of(s) for s in specs)
    unit = _unit_options(privacy_unit, max_groups, max_rows, eps_cap, weight_share)
    if unit is not None and is_ldp_release(specs):  # one report per person, global only
        check_ldp_unit(specs, normalize_by(by, specs), keys, unit.unit, unit.eps_cap,
                       unit.weight_share)
        explain_hook(specs)  # the LDP means explain has; the others refused as without a unit
        by_s, columns, rows = explain_ldp_unit(engine, specs, unit.unit)
        return engine.materialize(by_s, columns, rows, False)
    if unit is not None:
        by_s, columns, rows = explain_unit(engine, specs, by=by, keys=keys, unit=unit)
        return engine.materialize(by_s, columns, rows, False)
    hook = explain_hook(specs)
    by_s, columns, rows = hook(engine, specs, by=by, keys=keys)
    return engine.materialize(by_s, columns, rows, False)
