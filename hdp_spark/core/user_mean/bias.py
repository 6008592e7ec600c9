"""User-level mean: the worst-case gap between the final statistic and the users' mean.

The released interval must hold the table's own statistic: the plain mean of the users'
own means ȳ = Σ_i ȳ_i/n over the group's n users (every user counts, those with ε = 0 and
those of G_mean and G_var included; ȳ_i ∈ [0, 1] in unit scale, the mean of the user's
clamped values). The final step releases S + noise with

    S = Σ_{i ∈ G_fin} v_i·clamp(ȳ_i, a_i, b_i),   v_i = u_j/Z for user i of class j,

Σ_{i∈G_fin} v_i = 1, [a_i, b_i] ⊂ [0, 1] the class's clip interval (A_k, B_k)/(k·2^31). The
noise interval holds S with probability >= 1 - β given the design (the design is fixed by
the released initial mean and variance estimate before the final step's data are read). S
misses ȳ through three effects the noise interval ignores: users outside G_fin (weight 0),
weights that are not 1/n (they depend on k and ε), and clipping.

Claim. For every data set and every design, D⁻ <= S - ȳ <= D⁺ with

    D⁺ = Σ_{i∈G_fin} max(v_i·a_i, (v_i - 1/n)·b_i),
    D⁻ = Σ_{i∈G_fin} min((v_i - 1/n)·a_i, v_i·b_i - 1/n) - (n - n_fin)/n,

so the interval est ± (noise half-width + B), B = max(D⁺, -D⁻) = ``bias_bound`` (times the
range), holds ȳ with probability >= 1 - β on every data set.

Proof. S - ȳ = Σ_{i∈G_fin} f_i(ȳ_i) - Σ_{i∉G_fin} ȳ_i/n with f_i(y) = v_i·clamp(y, a_i,
b_i) - y/n, a sum of functions of one user's mean each, so its extremes over ȳ ∈ [0, 1]^n
are the sums of the extremes. f_i is piecewise linear: on [0, a_i] it falls from v_i·a_i
to (v_i - 1/n)·a_i, on [a_i, b_i] it is (v_i - 1/n)·y, on [b_i, 1] it falls from
(v_i - 1/n)·b_i to v_i·b_i - 1/n; its maximum is max(v_i·a_i, (v_i - 1/n)·b_i) and its
minimum min((v_i - 1/n)·a_i, v_i·b_i - 1/n) (the middle piece's ends are among these, as
b_i <= 1). A user outside G_fin adds -ȳ_i/n ∈ [-1/n, 0]. Given the design, the noise
interval holds S w.p. >= 1 - β, and then ȳ ∈ [S - D⁺, S - D⁻] ⊂ est ± (h + B); this holds
for every design, hence unconditionally; cutting to [0, 1] keeps ȳ, which is in it. ∎

Both bounds are attained (each user at its extreme), so no function of the design and n is
smaller. With one class, no clipping (a = 0, b = 1) and G_fin everyone, B = 0; in general
B >= (n - n_fin)/(2n) (the users the final step never reads, about 10 %: G_mean and G_var,
all at 0 or all at 1 leave S unchanged and move ȳ by (n - n_fin)/n), and more once weights
or clipping enter: a user-level mean is only as good, there, as the paper's assumption that
those users' means are like the others'.

Privacy: a function of the design (public counts, the released initial mean and variance
estimate) and the public n only.
"""

from __future__ import annotations

from fractions import Fraction

from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.user_mean.solver import FinalDesign

__all__ = ["final_bias_bound"]


def final_bias_bound(design: FinalDesign, n: int) -> Fraction:
    """B = max(D⁺, -D⁻) of the module docstring, exact, in unit scale (``n``: all users of
    the group, ε = 0 included; n > 0).

    Privacy:
        A function of the design and n only (see the module docstring).
    """
    inv = Fraction(1, n)
    up = Fraction(0)
    down = Fraction(0)
    n_fin = 0
    for (k, _), users, u in zip(design.classes, design.users, design.weights, strict=True):
        lo_int, hi_int = design.bounds[k]
        a, b = Fraction(lo_int, k * FIXED_ONE), Fraction(hi_int, k * FIXED_ONE)
        v = u / design.z
        up += users * max(v * a, (v - inv) * b)
        down += users * min((v - inv) * a, v * b - inv)
        n_fin += users
    down -= (n - n_fin) * inv
    return max(up, -down)
