"""User-level heterogeneous mean: Algorithm 2 of Cummings, Feldman, McMillan & Talwar,
*Mean Estimation with User-level Privacy under Data Heterogeneity* (NeurIPS 2022), §4.2.

Privacy-critical: user i's user-level ε_i-DP guarantee depends on this module (group split,
clamping of the per-user means, the three noise scales, the weight solver's Λ).
Argument in short (details under "Privacy argument" below): the groups G_var, G_mean, G_fin
are disjoint and chosen from public facts only, so by parallel composition each user pays
only for the one step that reads its data (the paper's Theorem 4.1, privacy part). Each
step's noise is scaled to that step's user-level sensitivity over the ε_i of its users:
initial mean Lap(max_j w_j/ε_j) with p̂_j ∈ [0, 1]; variance by an exponential mechanism with
score sensitivity 1 at min ε_i; final sum Lap(max_j d_j/ε_j) with d_j = u_j W_j / Z the
largest move of one clipped user. Per-user ε_i is our extension of the paper (which has one
ε), following the heterogeneous DP definition (Definition 1) of Chaudhuri & Courtade,
*Mean Estimation Under Heterogeneous Privacy: Some Privacy Can Be Free* (ISIT 2023).

Each user i holds k_i rows of a bounded value. The release estimates the population mean
p = E[p_i] of the users' own means, weighting users by how much data they hold, under
**user-level** differential privacy: neighbouring tables differ in all rows of one user,
with n (the number of users) and every k_i fixed and public (replace-one, as in the paper).

Pipeline (engine work is native; the driver sees only small tables):

* pass 1 (engine): one row per user: k_i = count, s_i = Σ of the fixed-point encoded clamped
  value (exact integers, :mod:`hdp_spark.core.encoding`), the user's ε_i and group.
* census (engine → driver): users per (group, k, ε level). Public: it holds only k and ε.
* grouping (driver, public data only): users sorted by (k descending, order key), where
  the order key is a hash of the user id with a public salt. G_var = the first L users
  (L = max(⌈ln n⌉, 2)), G_mean = the last m = n − ⌊9n/10⌋, G_fin = the rest. A k bucket
  split by a boundary is cut at an order-key threshold that the engine finds natively
  (:class:`RankQuery`); membership is then a native expression of (k, order key).
* step "initial" (G_mean, the users with the least data): p_init = Σ w_i p̂_i + Lap(η).
* step "variance" (G_var, the users with the most data): exponential mechanism over a
  dyadic grid for the median of squared differences of disjoint pairs (our instance of the
  paper's `variance_ε` input; its own estimator, Lemma F.4, is in an appendix).
* step "final" (G_fin): per (k, ε) class, the engine sums clip(p̂_i, â_k, b̂_k) natively
  (integer clamps broadcast as literals); the driver weighs the classes with an exact
  closed-form minimiser of the paper's objective (eq. 6; the derivation is ours, see
  :func:`solve_user_weights`) and adds Laplace noise.

Privacy argument (each step next to its code in :mod:`.steps`):

* The three groups are disjoint and membership depends only on k, ε and the user id with a
  public salt (all public in this model), never on values. A user's data enters exactly one
  step; every later step uses the earlier steps' *released* (noisy) outputs only. By
  parallel composition with adaptivity the pipeline gives user i the loss of its own step,
  which is at most ε_i (Theorem 4.1 of the paper, which uses the full budget in each
  step for the same reason: there is no split of ε across steps).
* step "initial": user i's p̂_i ∈ [0, 1] (values are clamped to [lower, upper] and imputed
  before encoding: the 1/m-type sensitivity holds only for values in [0, 1], and a mean
  that drops nulls would shrink its denominator with the data), so replacing user i moves
  Σ w_j p̂_j by at most w_i.
  Noise Lap(η) with η = max_j w_j/ε_j gives user i a loss w_i/η <= ε_i. Weights are
  the ADPM weights w ∝ min(ε, τ) (Chaudhuri & Courtade, ISIT 2023, Algorithm 1) over the
  G_mean ε histogram (public); with one ε they are 1/m and η = 1/(mε), i.e. Laplace on the
  sample mean, which §4.2 of the paper says suffices for its `mean_ε` input.
* step "variance": one user is in exactly one disjoint pair, so each count
  cnt_t = #{pairs with d_j <= 2^-t} moves by at most 1 and the score -|cnt_t - M/2| has
  sensitivity 1. The exponential mechanism at ε_var = min over G_var of ε_i is
  ε_var-DP <= ε_i for each of them. It is sampled exactly (uniform proposal, exact
  Bernoulli(exp(-x)) acceptance), so the probabilities are exactly ∝ exp(ε_var·score/2).
* step "final": the weights u_j, the intervals [A_k, B_k] and Z = Σ c_j u_j are functions of
  (k, ε) counts and the released p_init and s2 only. Replacing user i (class j) moves
  S/Z = Σ_j u_j Σ_{i∈j} clip(p̂_i)/Z by at most d_j = u_j W_j / Z, where W_j is the exact width
  of the integer clamp interval. Noise Lap(b) with b = max_j d_j/ε_j, on the ORIGINAL
  widths W_j (the solver works with W_j/ε_j, but clipping and d_j never do: clipping to
  the rescaled widths would give every user loss 1) gives class j a loss d_j/b <= ε_j.
  With one ε this is the paper's Lap(max_j w_j W_j / ε) of Algorithm 2, Step 9.

Every noisy quantity is drawn through :func:`hdp_spark.core.noise.laplace_mechanism` or the
exact :func:`~hdp_spark.core.noise.exponential_mechanism`, from a
:class:`~hdp_spark.core.noise.KeyedStream` bound to (release key, step, aggregator, group,
exact pre-noise statistics).

What is proven and what is not: the privacy of every step (above) is proven for any data,
any k and any ε_i. The paper's accuracy guarantee (Theorem 4.1: variance within a constant
of the ideal estimator) holds for one common ε, Bernoulli data and its conditions; for
per-user ε_i (our extension) only the optimality of the final weights for the proxy
objective is checked numerically, no accuracy theorem is claimed.

Modules: :mod:`.spec` (the specification and constants), :mod:`.census` (order key, census,
group plan), :mod:`.steps` (engine interface and the three noisy steps), :mod:`.solver` (weight
solver and final design), :mod:`.release` (orchestration and results).
"""

from __future__ import annotations

from hdp_spark.core.user_mean.census import (
    Census,
    CensusCell,
    Cut,
    GroupPlan,
    RankQuery,
    order_key,
    plan_group,
)
from hdp_spark.core.user_mean.release import (
    USER_MEAN_FIELDS,
    UserMeanRelease,
    UserMeanResult,
    run_user_mean,
)
from hdp_spark.core.user_mean.solver import (
    FinalDesign,
    SolverResult,
    concentration,
    design_final,
    proxy_objective,
    solve_user_weights,
)
from hdp_spark.core.user_mean.spec import (
    CHI2_MEDIAN,
    DEFAULT_SALT,
    HASH_HEX,
    KAPPA_L,
    KAPPA_V,
    MIN_USERS,
    OrderKey,
    UserMeanCap,
    UserMeanSpec,
    hdp_user_mean,
)
from hdp_spark.core.user_mean.steps import (
    ClassPrivacy,
    FinalCell,
    FirstStage,
    MeanCell,
    UserBackend,
    VarUser,
    final_step,
    initial_step,
    variance_step,
)

__all__ = [
    "CHI2_MEDIAN",
    "DEFAULT_SALT",
    "HASH_HEX",
    "KAPPA_L",
    "KAPPA_V",
    "MIN_USERS",
    "USER_MEAN_FIELDS",
    "Census",
    "CensusCell",
    "ClassPrivacy",
    "Cut",
    "FinalCell",
    "FinalDesign",
    "FirstStage",
    "GroupPlan",
    "MeanCell",
    "OrderKey",
    "RankQuery",
    "SolverResult",
    "UserBackend",
    "UserMeanCap",
    "UserMeanRelease",
    "UserMeanResult",
    "UserMeanSpec",
    "VarUser",
    "concentration",
    "design_final",
    "final_step",
    "hdp_user_mean",
    "initial_step",
    "order_key",
    "plan_group",
    "proxy_objective",
    "run_user_mean",
    "solve_user_weights",
    "variance_step",
]
