"""The partial-DP families a record-count Column finalizes (heavy hitters, marginals, MWEM,
per-attribute histograms): per spec class, the release API's kernel, the name of the
released table's field in the Column's struct and the report's scalar fields.

Privacy-critical module (it picks the mechanism a group's counts go through). Every family
runs its release API kernel's own ``run`` -- the same code the release API runs -- over an
engine that answers from one group's exact whole-record counts
(:class:`~hdp_spark.core.partial.record_counter.RecordCounter`): the tree counter of heavy
hitters, marginals and MWEM, and the per-attribute counts of the histograms (each a
function of the multiset of whole records). No mechanism is copied here.

Imports no pyspark session: it runs in Spark's Python workers.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hdp_spark.core.kernels import HeavyHittersKernel, MarginalsKernel, MwemKernel
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.partial.histogram_kernel import AttributeHistogramKernel
from hdp_spark.core.partial.mwem import MwemSpec
from hdp_spark.core.partial.projection import MarginalsSpec
from hdp_spark.core.partial.record_counter import RecordCounter
from hdp_spark.core.partial.spec import AttributeHistogramSpec, HeavyHittersSpec
from hdp_spark.core.partial.tree import NodeRequest, key_weights
from hdp_spark.core.pipeline import OutputField
from hdp_spark.errors import ParameterError

__all__ = ["HH_REPORT_FIELDS", "Family", "family_of", "run_group"]

RecordSpec = HeavyHittersSpec | MarginalsSpec | MwemSpec | AttributeHistogramSpec


def _fields(kind: str, names: str) -> tuple[OutputField, ...]:
    return tuple(OutputField(n, kind, nullable=False) for n in names.split())


HH_REPORT_FIELDS: tuple[OutputField, ...] = (
    *_fields("int", "d d_pad depth noisy_nodes"),
    *_fields("float", "eps0 eps_attribute eps_tree eps_tree_lemma28 eps_tree_naive eps_count "
                      "eps_person eps_person_group_privacy rho_attribute rho_person "
                      "tree_scale"),
    OutputField("mu", "int", nullable=False),
    OutputField("kappa", "float", nullable=False),
    OutputField("count_scale", "float?"),
    OutputField("count_ci_level", "float?"),
    OutputField("delta", "float", nullable=False),
    OutputField("release_max_count", "int", nullable=False),
    OutputField("failure_prob", "float", nullable=False),
    OutputField("detection_count", "int", nullable=False),
    OutputField("leaf_thresholding", "bool", nullable=False),
    OutputField("leaf_threshold", "int?"),
    OutputField("leaf_low_inclusion", "float?"),
    OutputField("unit_checked", "bool", nullable=False),
    OutputField("unsafe_seed", "bool", nullable=False),
)
"""The scalar numeric and boolean fields of
:class:`~hdp_spark.core.partial.heavy_hitters.HeavyHittersReport` (public: functions of the
parameters only, the same in every group)."""

MARGINALS_REPORT_FIELDS: tuple[OutputField, ...] = (
    *_fields("int", "d domain_size n"),
    *_fields("float", "eps0 sigma2 noise_std_count sens_attribute sens_person rho_attribute "
                      "eps_attribute rho_person eps_person rho_person_prop8 delta "
                      "eps_delta_attribute_cks20 eps_delta_person_cks20 "
                      "eps_delta_person_bs16 projection_gap"),
    *_fields("int", "projection_iterations"),
    *_fields("bool", "projection_converged unit_checked unsafe_seed"),
)
"""The scalar fields of :class:`~hdp_spark.core.partial.projection.MarginalsReport`: the
budget (public), the group's n (public; under a privacy unit the noisy-total estimate ñ,
DP), and the projection's gap, iterations and convergence (DP: functions of the noisy
counts)."""

MWEM_REPORT_FIELDS: tuple[OutputField, ...] = (
    *_fields("int", "rounds per_round n"),
    *_fields("float", "eps0 eps_round rho_attribute rho_person rho_person_theorem12 delta "
                      "eps_delta_attribute_cks20 eps_delta_person_cks20"),
    *_fields("bool", "unsafe_seed"),
)
"""The scalar fields of the MWEM report (budget, T, ε_T; n public, or under a privacy
unit the measured ñ, DP, which T's default then follows)."""

HISTOGRAM_REPORT_FIELDS: tuple[OutputField, ...] = (
    *_fields("float", "eps0 eps_attribute noise_scale eps_person rho_person count_ci_level"),
    *_fields("bool", "unit_checked unsafe_seed"),
    *_fields("int", "max_rows"),
)
"""The scalar fields of :class:`~hdp_spark.core.partial.histograms.HistogramReport`."""


@dataclass(frozen=True, slots=True)
class Family:
    """One partial-DP family as a record-count Column.

    Attributes:
        label: the public constructor's name, for messages.
        main: the struct field of the released table.
        kernel: the release API's kernel (``run``, ``fields``, ``values``).
        report: the report's scalar fields after ``main``.
    """

    label: str
    main: str
    kernel: Any
    report: tuple[OutputField, ...]

    def fields(self, spec: Any) -> list[tuple[str, OutputField]]:
        """The Column's struct fields: ``main`` (the kernel's list), then the report's.

        Privacy:
            None: the output layout is public.
        """
        table: OutputField = self.kernel.fields(spec)[0]
        return [(self.main, table), *((f.suffix, f) for f in self.report)]


_FAMILIES: dict[type, Family] = {
    HeavyHittersSpec: Family("hdp_heavy_hitters", "records", HeavyHittersKernel(),
                             HH_REPORT_FIELDS),
    MarginalsSpec: Family("hdp_marginals", "cells", MarginalsKernel(),
                          MARGINALS_REPORT_FIELDS),
    MwemSpec: Family("hdp_mwem", "cells", MwemKernel(), MWEM_REPORT_FIELDS),
    AttributeHistogramSpec: Family("attribute_histograms", "cells",
                                   AttributeHistogramKernel(), HISTOGRAM_REPORT_FIELDS),
}


def family_of(spec: object) -> Family:
    """The family of a partial-DP spec.

    Raises:
        ParameterError: ``spec`` is not a heavy-hitters, marginals, MWEM or
            attribute-histograms spec.

    Privacy:
        None: reads a public spec's type.
    """
    family = _FAMILIES.get(type(spec))
    if family is None:
        msg = ("`spec` of a record-count Column must come from hdp_heavy_hitters, "
               f"hdp_marginals, hdp_mwem or attribute_histograms, got {type(spec).__name__}.")
        raise ParameterError(msg)
    return family


class _GroupEngine:
    """The two questions the partial-DP kernels ask an engine, answered from one group's
    exact record counts."""

    def __init__(self, counter: RecordCounter) -> None:
        self._counter = counter

    @contextmanager
    def tree_counter(self, spec: object) -> Iterator[RecordCounter]:
        yield self._counter

    def attribute_counts(self, spec: AttributeHistogramSpec) -> list[dict[int, int]]:
        sizes = [d.size for d in spec.domains]
        requests = [NodeRequest(j, (j,), key_weights((j,), sizes), ())
                    for j in range(len(sizes))]
        counts = self._counter.count_level(requests, -1)  # every present code
        return [counts.get(j, {}) for j in range(len(sizes))]


def run_group(spec: Any, counter: RecordCounter, key: ReleaseKey) -> tuple[Any, ...]:
    """One group's released row, in the order of :meth:`Family.fields`: the release API
    kernel's ``run`` over the group's exact record counts, under ``key``.

    Privacy:
        The family's release API mechanism, once, under ``key`` (the caller derives one
        key per query and group).
    """
    family = family_of(spec)
    engine = _GroupEngine(counter)
    result = family.kernel.run(spec, engine, (), ((),), key)[()]
    report = result.report if isinstance(result.report, dict) else result.report.as_dict()
    return (*family.kernel.values(spec, result), *(report[f.suffix] for f in family.report))
