"""The moment learner: the ridge path of the release's debiased second moments, chosen privately.

For the quadratic loss the IWP risk of theta = (w, c) is theta^T G theta - 2 theta^T b (plus a
constant), with G-hat and b-hat the release's debiased moments (``moment_stats``).  Its exact
minimizer for a ridge alpha (alpha/2 |w|^2, the intercept unpenalized, as SGD's ``alpha``) is one
(p+1)-square solve, so a model needs one pass and no step.  The search is three stages, each a
function of the one before (docs/tuning.md "The moment learner"):

- ``candidates``: the alphas (a grid scaled by the mean feature variance, or the user's) and the
  constant model (w = 0, c the label's debiased mean);
- ``scan``: per fold f of the pass (``moment_stats.fold_moments``), every candidate solved on the
  other folds' sums and its quadratic risk measured on fold f's sums; with the guard that keeps an
  alpha only where G-hat + alpha D is safely positive definite on every training part and on all
  rows (``guard_floor``);
- ``choose``: the lowest mean validation risk among the guarded alphas and the constant model;
  ``MomentSearch.constant_margin`` > 0 asks the best alpha to beat the constant by that many
  standard errors of the paired per-group differences (0 by default: a margin of 1 returned the
  constant on releases where every alpha's clean R^2 was far above it, e.g. ACS income all
  private, mean R^2 0.203 against 0.239 with 0 over 6 releases, bench notes of issue 46).

``refit`` solves the chosen alpha on every row.  With an intercept the solve eliminates it first:
G = [[A, m], [m^T, g]] gives w = (S + alpha I)^-1 (b_x - m b_1 / g), S = A - m m^T / g,
c = (b_1 - m^T w) / g (g = 1, the mean of the constant 1, unless rows are weighted); one
symmetric eigendecomposition of S then serves every alpha, and S + alpha I is positive definite
exactly when G + alpha D is (the pivot g is positive).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .exceptions import InvalidInputError
from .moment_stats import Moments

#: the default alphas, as multiples of the mean feature variance tr(S)/p (the scale at which the
#: ridge starts to shrink); 0 first (ordinary least squares on the debiased moments)
RELATIVE_ALPHAS = (0.0, *np.geomspace(1e-6, 10.0, 36).tolist())


@dataclass(frozen=True)
class MomentSearch:
    """How the moment learner chooses alpha.

    folds: parts of the one pass (each validates the model solved on the others; >= 2).
    groups: the parts the pass accumulates (a multiple of ``folds``: group g is in fold
    g % folds, so the folds are the same as reading ``folds`` parts); the jackknife of
    ``coef_stderr_`` deletes one group at a time (19 degrees of freedom against the 4 of
    deleting a fold: single coefficients' standard errors stop scattering by a factor of 3).
    alphas: the candidate alphas (None: ``RELATIVE_ALPHAS`` times the mean feature variance).
    floor_factor: the guard's multiple of the estimated spectral error of G-hat (``guard_floor``).
    constant_margin: how many standard errors the chosen model must beat the constant model by
    (0: the lower mean validation risk wins).
    """

    folds: int = 5
    groups: int = 20
    alphas: tuple[float, ...] | None = None
    floor_factor: float = 1.0
    constant_margin: float = 0.0

    def __post_init__(self):
        if int(self.folds) < 2:
            raise InvalidInputError(f"folds={self.folds}: the moment search needs at least 2 "
                                    "folds (one validates the others)")
        if int(self.groups) < int(self.folds) or int(self.groups) % int(self.folds):
            raise InvalidInputError(f"groups={self.groups} must be a multiple of folds="
                                    f"{self.folds} (each fold is groups / folds groups)")
        for name in ("floor_factor", "constant_margin"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise InvalidInputError(f"{name}={value} must be a finite number >= 0")


@dataclass
class Reduced:
    """The intercept eliminated: S (p, p), r (p, K), b_1 (K,), m (p,) and the pivot g (the mean
    weight of a row: 1 unweighted); the constant model's intercept is b_1 / g."""

    S: np.ndarray
    r: np.ndarray
    b1: np.ndarray
    m: np.ndarray
    pivot: float = 1.0

    @property
    def constant(self) -> np.ndarray:
        return self.b1 / self.pivot

    def solve(self, alphas, eig=None) -> tuple[np.ndarray, np.ndarray]:
        """w (len(alphas), p, K) and c (len(alphas), K) for each alpha (non-PD ones: nan)."""
        lam, V = np.linalg.eigh(self.S) if eig is None else eig
        proj = V.T @ self.r                                         # (p, K)
        alphas = np.asarray(alphas, np.float64)
        shifted = lam[None, :] + alphas[:, None]                    # (A, p)
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(shifted > 0, 1.0 / shifted, np.nan)
        w = np.einsum("ij,aj,jk->aik", V, scale, proj)
        c = (self.b1[None, :] - np.einsum("p,apk->ak", self.m, w)) / self.pivot
        return w, c


def reduce(G: np.ndarray, b: np.ndarray, fit_intercept: bool) -> Reduced:
    """G (d, d), b (d, K) -> the intercept-free system (fit_intercept=False: z's last coordinate
    dropped, c = 0)."""
    p = G.shape[0] - 1
    A, bx = G[:p, :p], b[:p]
    if not fit_intercept:
        return Reduced(0.5 * (A + A.T), bx.copy(), np.zeros(b.shape[1]), np.zeros(p))
    m, b1, g = G[:p, p], b[p], float(G[p, p])
    if not g > 0:
        raise InvalidInputError(f"the rows' mean weight is {g:g}: nothing to fit an intercept "
                                "on (class weights of 0 for every observed class?)")
    S = A - np.outer(m, m) / g
    return Reduced(0.5 * (S + S.T), bx - np.outer(m, b1) / g, b1.copy(), m.copy(), g)


def _means(mo: Moments) -> tuple[np.ndarray, np.ndarray]:
    n = max(mo.rows, 1)
    return mo.gram_sum / n, mo.rhs_sum / n


def quadratic_risk(G: np.ndarray, b: np.ndarray, w: np.ndarray, c: np.ndarray) -> np.ndarray:
    """theta^T G theta - 2 theta^T b summed over the K right-hand sides, for each of the models
    w (A, p, K), c (A, K): the quadratic risk less its constant E[y^2] (the same for every
    model, so differences are exact)."""
    theta = np.concatenate([w, c[:, None, :]], axis=1)              # (A, d, K)
    quad = np.einsum("adk,de,aek->a", theta, G, theta)
    return quad - 2.0 * np.einsum("adk,dk->a", theta, b)


def candidates(total: Moments, search: MomentSearch, fit_intercept: bool) -> np.ndarray:
    """The alphas to try: the search's, or the default grid times tr(S)/p."""
    if search.alphas is not None:
        alphas = np.asarray(search.alphas, np.float64)
        if alphas.size == 0 or not np.all(np.isfinite(alphas)) or np.any(alphas < 0):
            raise InvalidInputError(f"alphas={list(search.alphas)} must be finite numbers >= 0")
        return alphas
    G, b = _means(total)
    S = reduce(G, b, fit_intercept).S
    scale = float(np.trace(S)) / max(S.shape[0], 1)
    return np.asarray(RELATIVE_ALPHAS) * (scale if scale > 0 else 1.0)


def guard_floor(folds: list[Moments], total: Moments, fit_intercept: bool) -> float:
    """The estimated spectral-norm error of S-hat on all rows, ||S-hat - S||.

    A fold's S_f - S_all has (F - 1) times the covariance of S_all - S (F equal parts: Var S_f =
    F Var S_all, Cov(S_f, S_all) = Var S_all), so the median over the folds of ||S_f - S_all|| /
    sqrt(F - 1) estimates it, whatever the columns' laws (Gaussian, Laplace, randomized response,
    public).  It is of the order sigma^2 sqrt(p / n) for Gaussian noise of variance sigma^2 (a
    p-square matrix of independent entries of SD s has spectral norm about 2 s sqrt(p)).  Why it
    guards: w-hat - w = (S-hat + alpha I)^-1 ((r-hat - r) - (S-hat - S) w), so an alpha at which
    lambda_min(S-hat) + alpha falls below ||S-hat - S|| lets the noise of S-hat move w by more
    than |w| itself."""
    F = len(folds)
    S = reduce(*_means(total), fit_intercept).S
    devs = [np.linalg.norm(reduce(*_means(f), fit_intercept).S - S, 2) for f in folds if f.rows]
    return float(np.median(devs)) / math.sqrt(max(F - 1, 1)) if devs else 0.0


@dataclass
class Scan:
    """Every candidate's validation risk per fold (rows: the alphas, then the constant model)."""

    alphas: np.ndarray
    risks: np.ndarray           # (len(alphas) + 1, parts): per validation part
    allowed: np.ndarray         # (len(alphas),) bool: guarded alphas
    fold_rows: np.ndarray       # (parts,): the rows of each validation part
    floor: float
    min_eigenvalue: float       # lambda_min(S-hat) on all rows
    notes: list = field(default_factory=list)
    folds: int | None = None    # the folds the models were solved without (None: parts)


def scan(folds: list[Moments], alphas: np.ndarray, fit_intercept: bool,
         search: MomentSearch, groups: list[Moments] | None = None) -> Scan:
    """Each fold validates the models solved on the other folds' sums (no second read).
    ``groups`` (the pass's groups, group g in fold g % F): each group's risk is measured on
    its own moments, with its fold's models, so that the paired standard errors of ``choose``
    have groups - 1 degrees of freedom instead of F - 1."""
    total = sum(folds[1:], folds[0])
    floor = search.floor_factor * guard_floor(folds, total, fit_intercept)
    F = len(folds)
    parts = list(folds) if groups is None else list(groups)
    risks = np.full((len(alphas) + 1, len(parts)), np.nan)
    allowed = np.ones(len(alphas), bool)
    lam_all = np.linalg.eigvalsh(reduce(*_means(total), fit_intercept).S)
    allowed &= lam_all[0] + alphas >= floor
    train_floor = floor * math.sqrt(F / max(F - 1, 1))
    for f, held in enumerate(folds):
        if held.rows == 0:
            continue
        train = total + _negated(held)
        reduced = reduce(*_means(train), fit_intercept)
        eig = np.linalg.eigh(reduced.S)
        allowed &= eig[0][0] + alphas >= train_floor
        w, c = reduced.solve(alphas, eig)
        const_c = reduced.constant[None, :] if fit_intercept else np.zeros((1, w.shape[2]))
        for g in range(f, len(parts), F):
            if parts[g].rows == 0:
                continue
            G_v, b_v = _means(parts[g])
            risks[:-1, g] = quadratic_risk(G_v, b_v, w, c)
            risks[-1, g] = quadratic_risk(G_v, b_v, np.zeros((1, w.shape[1], w.shape[2])),
                                          const_c)[0]
    return Scan(alphas, risks, allowed, np.array([p.rows for p in parts]), floor,
                float(lam_all[0]), folds=F)


def scan_holdout(folds: list[Moments], held: list[Moments], alphas: np.ndarray,
                 fit_intercept: bool, search: MomentSearch) -> Scan:
    """``validation=``: every candidate solved on all of the training folds and its risk measured
    on each part of a separate release's moments (``held``, its own folds: the paired SE);
    the guard on the training rows only."""
    total = sum(folds[1:], folds[0])
    floor = search.floor_factor * guard_floor(folds, total, fit_intercept)
    reduced = reduce(*_means(total), fit_intercept)
    eig = np.linalg.eigh(reduced.S)
    allowed = eig[0][0] + alphas >= floor
    w, c = reduced.solve(alphas, eig)
    const_c = reduced.constant[None, :] if fit_intercept else np.zeros((1, w.shape[2]))
    risks = np.full((len(alphas) + 1, len(held)), np.nan)
    for f, part in enumerate(held):
        if part.rows == 0:
            continue
        G_v, b_v = _means(part)
        risks[:-1, f] = quadratic_risk(G_v, b_v, w, c)
        risks[-1, f] = quadratic_risk(G_v, b_v, np.zeros((1, w.shape[1], w.shape[2])),
                                      const_c)[0]
    return Scan(alphas, risks, allowed, np.array([p.rows for p in held]), floor,
                float(eig[0][0]), ["validated on a separate release's moments"])


def _negated(mo: Moments) -> Moments:
    return Moments(-mo.rows, -mo.gram_sum, -mo.rhs_sum, mo.names, mo.targets, mo.debiased)


@dataclass
class Choice:
    """The chosen candidate (an alpha, or None for the constant model) and why."""

    alpha: float | None
    index: int
    rule: str
    mean_risk: np.ndarray
    stderr: np.ndarray


def choose(sc: Scan, search: MomentSearch) -> Choice:
    """The lowest mean validation risk among the guarded alphas, unless the constant model is
    within ``constant_margin`` paired standard errors of it."""
    used = sc.fold_rows > 0
    weights = sc.fold_rows[used] / sc.fold_rows[used].sum()
    R = sc.risks[:, used]
    mean = R @ weights
    k = int(used.sum())
    const = len(sc.alphas)
    diff = R - R[const]
    stderr = (np.std(diff, axis=1, ddof=1) / math.sqrt(k)) if k > 1 else np.full(len(R), np.inf)
    ok = sc.allowed & np.isfinite(mean[:const])
    if not ok.any():
        return Choice(None, const, "constant model: no alpha passed the positive-definite guard "
                      f"(lambda_min {sc.min_eigenvalue:.3g}, floor {sc.floor:.3g})", mean, stderr)
    best = int(np.flatnonzero(ok)[np.argmin(mean[:const][ok])])
    gain = mean[const] - mean[best]
    if not gain > search.constant_margin * stderr[best]:
        return Choice(None, const, f"constant model: the best alpha beats it by {gain:.3g}, not "
                      f"more than {search.constant_margin:g} standard error(s) "
                      f"({stderr[best]:.3g})", mean, stderr)
    return Choice(float(sc.alphas[best]), best, "lowest mean validation risk over the folds "
                  "among the guarded alphas", mean, stderr)


@dataclass
class MomentFit:
    """The solution: coef (K, p), intercept (K,), the alpha (None: the constant model), and the
    ``tuning_`` table of a search (None for a fixed alpha)."""

    coef: np.ndarray
    intercept: np.ndarray
    alpha: float | None
    tuning: dict | None = None
    #: jackknife standard errors of coef and intercept over the folds (None: one fold)
    coef_stderr: np.ndarray | None = None
    intercept_stderr: np.ndarray | None = None


def refit(total: Moments, alpha: float | None, fit_intercept: bool) -> tuple[np.ndarray, np.ndarray]:
    """coef (K, p) and intercept (K,) on every row: the alpha's ridge solution, or the constant
    model (alpha None).  A fixed alpha at which G-hat + alpha D is not positive definite is
    refused, naming the smallest alpha that is."""
    reduced = reduce(*_means(total), fit_intercept)
    p, K = reduced.r.shape
    if alpha is None:
        return np.zeros((K, p)), (reduced.constant if fit_intercept else np.zeros(K)).copy()
    eig = np.linalg.eigh(reduced.S)
    if eig[0].size and eig[0][0] + alpha <= 0:
        raise InvalidInputError(
            f"alpha={alpha:g}: the debiased Gram G + alpha*D is not positive definite (its "
            f"smallest eigenvalue is {eig[0][0]:.3g}: the release's noise makes it indefinite on "
            f"small or noisy data); use alpha > {-eig[0][0]:.3g}, or alpha='auto'")
    w, c = reduced.solve([alpha], eig)
    return w[0].T.copy(), c[0].copy()


def merge_parts(parts: list[Moments], folds: int) -> list[Moments]:
    """The ``folds`` folds of the pass's parts: part g is in fold g % folds (``parts`` of
    ``MomentSearch.groups`` groups or already ``folds`` folds)."""
    if len(parts) <= folds or len(parts) % folds:
        return list(parts)
    return [sum(parts[f + folds::folds], parts[f]) for f in range(folds)]


def fit_moments(folds: list[Moments], *, alpha=None, fit_intercept: bool = True,
                search: MomentSearch | None = None,
                validation: list[Moments] | None = None) -> MomentFit:
    """The model of the moments of ``folds`` (one part each, or ``search.groups`` groups:
    merged into ``search.folds`` folds for the search, deleted one at a time by the
    jackknife): ``alpha`` a number (solved on every row, no search), else the stages candidates
    -> scan -> choose -> refit (a list of alphas: those are the candidates).  ``validation``:
    the parts of a separate release's moments (the same coordinates and targets) that score
    the candidates instead of the folds."""
    search = MomentSearch() if search is None else search
    groups = list(folds)
    folds = merge_parts(groups, int(search.folds))
    total = sum(folds[1:], folds[0])
    if total.n_targets == 0:
        raise InvalidInputError("the moments hold no label (no right-hand side)")
    if alpha is not None and not isinstance(alpha, (list, tuple, np.ndarray)):
        coef, intercept = refit(total, float(alpha), fit_intercept)
        return MomentFit(coef, intercept, float(alpha), None,
                         *jackknife(groups, total, float(alpha), fit_intercept))
    if alpha is not None:
        import dataclasses
        search = dataclasses.replace(search, alphas=tuple(float(a) for a in alpha))
    if len(folds) < 2:
        raise InvalidInputError("choosing alpha needs the moments of at least 2 folds")
    alphas = candidates(total, search, fit_intercept)
    if validation is not None:
        if validation[0].names != total.names or validation[0].targets != total.targets:
            raise InvalidInputError(
                f"the validation release's coordinates {list(validation[0].names)} / targets "
                f"{list(validation[0].targets)} differ from the training ones "
                f"{list(total.names)} / {list(total.targets)}: release both with the same "
                "features, categories and label")
        sc = scan_holdout(folds, validation, alphas, fit_intercept, search)
    else:
        sc = scan(folds, alphas, fit_intercept, search, groups=groups)
    choice = choose(sc, search)
    coef, intercept = refit(total, choice.alpha, fit_intercept)
    return MomentFit(coef, intercept, choice.alpha, _tuning(sc, choice, total),
                     *jackknife(groups, total, choice.alpha, fit_intercept))


def jackknife(folds: list[Moments], total: Moments, alpha: float | None,
              fit_intercept: bool) -> tuple:
    """Standard errors of (coef, intercept) by the delete-one-group jackknife: the model solved
    without part f for each f, se = sqrt((F - 1)/F sum_f (theta_(f) - mean)^2).  It covers
    the release's noise and the sampling of the rows together (every row's noise is in its
    part); F - 1 degrees of freedom (19 with the default 20 groups).  (None, None) for one
    part, or where a leave-one-out Gram is not positive definite at ``alpha``."""
    F = len(folds)
    if F < 2:
        return None, None
    thetas = []
    for held in folds:
        try:
            coef, intercept = refit(total + _negated(held), alpha, fit_intercept)
        except InvalidInputError:
            return None, None
        thetas.append(np.concatenate([coef, intercept[:, None]], axis=1))
    T = np.stack(thetas)                                    # (F, K, p + 1)
    se = np.sqrt((F - 1) / F * ((T - T.mean(axis=0)) ** 2).sum(axis=0))
    return se[:, :-1], se[:, -1]


def _tuning(sc: Scan, choice: Choice, total: Moments) -> dict:
    """``tuning_`` (``iwpfast.sgd.choice.tuning_table``): one entry per candidate (the alphas,
    then the constant model), every row scored once over the folds."""
    from .sgd.choice import tuning_table
    n = len(sc.alphas)
    return tuning_table(
        {"alpha": [float(a) for a in sc.alphas] + [math.nan],
         "learning_rate": [math.nan] * (n + 1),
         "risk": [float(r) for r in choice.mean_risk],
         "stderr": [float(s) for s in choice.stderr],
         "reliable": [bool(a) for a in sc.allowed] + [True],
         "chosen": [i == choice.index for i in range(n + 1)]},
        learner=["moments"] * n + ["constant"], rule=choice.rule, n_train=int(total.rows),
        n_validation=int(sc.fold_rows.sum()), passes=1,
        folds=int(sc.folds or len(sc.fold_rows)), edge=None,
        notes=list(total.debiased) + sc.notes,
        risk_kind="quadratic risk less E[y^2], mean over the folds; stderr of the paired "
                  "difference to the constant model",
        guard={"floor": float(sc.floor), "min_eigenvalue": float(sc.min_eigenvalue)})
