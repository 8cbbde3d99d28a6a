"""The discrete Laplace law on a grid and its exact inverse (NumPy spec; docs/math.md "Pure
epsilon: the discrete Laplace mechanism"), and its Gaussian counterpart ``GaussianLaw``: the two
law objects of the learner's protocol (``iwpfast.noise_registry.LearnerLaw``).

A pure-epsilon release adds ``L * Z`` to the snapped value ``L * round(v / L)`` of each clipped,
scaled feature, with ``Z`` discrete Laplace on the integers: ``P(Z = k) = (1 - a)/(1 + a) a^|k|``,
``a = exp(-L / b)`` (``b`` the scale in feature units, ``L`` the grid).  Facts used by the learner
(proved in docs/math.md):

- variance ``Var(L Z) = 2 a L^2 / (1 - a)^2``; characteristic function
  ``(1 - a)^2 / (1 - 2 a cos t + a^2)``; ``E[e^{t Z}]`` is finite iff ``a e^{|t|} < 1``;
- per coordinate j, with ``h = L_j theta_j``, the second difference
  ``D_j f(u) = [(1 + a^2) f(u) - a f(u + h) - a f(u - h)] / (1 - a)^2`` satisfies
  ``E[D_j f(u + h Z)] = f(u)``; composing ``D_1 ... D_p`` inverts the noise of ``theta^T x~``;
- exponential loss: ``D_1 ... D_p e^{-u} = e^{-u} prod_j kappa_j``, with
  ``kappa_j = (1 + a^2 - 2 a cosh h)/(1 - a)^2 = 1 - 4 c_j sinh^2(h / 2)``, ``c_j = a/(1 - a)^2``
  (the second form has no cancellation); ``kappa_j > 0`` iff ``|theta_j| < 1/b_j``, and the
  estimate's variance is finite iff ``|theta_j| < 1/(2 b_j)``;
- quadratic and squared-error losses: ``D_j f = f - (Var_j theta_j^2 / 2) f''``: the Gaussian
  formula with ``s_j = Var_j``, exactly.

Example::

    >>> import numpy as np
    >>> from iwpfast.laplace import DiscreteLaplace
    >>> law = DiscreteLaplace(scale=0.5, grid=2.0**-4)
    >>> round(float(law.variance[0]), 6), round(2 * 0.5**2, 6)   # close to the continuous 2 b^2
    (0.499349, 0.5)
    >>> log_kappa, direction = law.exponential_factor(np.array([0.3]))
    >>> round(float(np.exp(log_kappa[0])), 6)    # kappa, about 1 - b^2 theta^2 = 0.9775
    0.977529
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .exceptions import InvalidInputError, ReleaseSpecError
from .noise_registry import LearnerLaw, record_of_law

__all__ = ["DiscreteLaplace", "GaussianLaw", "check_laplace_cap", "second_difference", "compose_inverse",
           "lattice_expectation"]

#: the largest |theta_j| b_j a Laplace head may reach, as a fraction of the exponential loss's
#: finite-variance limit 1/(2 b_j): at energy Var_j theta_j^2 = r^2/2 in one coordinate the
#: second moment of a row's estimate grows by about (1 - r^2/4)^2 / (1 - r^2)  (3.4 at r = 0.9)
DEFAULT_REGION_FRACTION = 0.9


def _positive_array(value, name: str, zero_ok: bool = False) -> np.ndarray:
    array = np.atleast_1d(np.asarray(value, dtype=np.float64))
    low = np.any(array < 0) if zero_ok else np.any(array <= 0)
    if array.ndim != 1 or not np.all(np.isfinite(array)) or low:
        raise InvalidInputError(f"{name}={value!r} must be a number {'>=' if zero_ok else '>'} 0 "
                                "or a 1-D array of them")
    return array


@dataclass(frozen=True, eq=False)
class DiscreteLaplace(LearnerLaw):
    """The discrete Laplace law ``L_j Z_j`` of each feature: scale ``b_j`` and grid ``L_j``
    (numbers or (p,) arrays; ``a_j = exp(-L_j / b_j)``).  A scale of 0 is a feature without noise
    (a public column): a_j = 0, variance 0, kappa_j = 1.

    The learner's view of the law (``noise_registry.LearnerLaw``): which losses it debiases and
    its kernel code are its record's (``law``), its tau the product of the kappa_j, its cap
    ``default_variance_cap``."""

    #: the metadata name of its record in ``iwpfast.noise_registry`` (its support table)
    law: ClassVar[str] = "discrete_laplace"

    scale: np.ndarray
    grid: np.ndarray

    # numbers or arrays in, (p,) arrays stored: the fields are typed as stored so that the methods
    # index them without a cast
    def __init__(self, scale: np.ndarray | float, grid: np.ndarray | float):
        scale = _positive_array(scale, "scale", zero_ok=True)
        grid = _positive_array(grid, "grid")
        try:
            scale, grid = np.broadcast_arrays(scale, grid)
        except ValueError:
            raise InvalidInputError(f"scale has {scale.size} entries and grid {grid.size}; pass one "
                                    "of each per feature, or numbers") from None
        object.__setattr__(self, "scale", np.array(scale))
        object.__setattr__(self, "grid", np.array(grid))

    def broadcast(self, p: int) -> DiscreteLaplace:
        """The law of ``p`` features (a law given by numbers applies to every feature)."""
        if self.scale.size == p:
            return self
        if self.scale.size == 1:        # type(self): a law under a record of its own stays so
            return type(self)(np.full(p, self.scale[0]), np.full(p, self.grid[0]))
        raise InvalidInputError(f"the Laplace law has {self.scale.size} features but the data has {p} "
                                "columns; pass one scale and grid per column, or numbers")

    @property
    def _rate(self) -> np.ndarray:
        """L_j / b_j (inf for a feature without noise)."""
        noised = self.scale > 0
        return np.where(noised, self.grid / np.where(noised, self.scale, 1.0), np.inf)

    @property
    def alpha(self) -> np.ndarray:
        return np.exp(-self._rate)

    @property
    def one_minus_alpha(self) -> np.ndarray:
        """1 - a without cancellation (a is close to 1 on a fine grid)."""
        return -np.expm1(-self._rate)

    @property
    def curvature_constant(self) -> np.ndarray:
        """c_j = a_j / (1 - a_j)^2: kappa_j = 1 - 4 c_j sinh^2(L_j theta_j / 2)."""
        return self.alpha / self.one_minus_alpha**2

    @property
    def variance(self) -> np.ndarray:
        """Var(L_j Z_j) = 2 a L^2 / (1 - a)^2, exactly (feature units squared)."""
        return 2.0 * self.curvature_constant * self.grid**2

    @property
    def variance_limit(self) -> np.ndarray:
        """|theta_j| < 1 / (2 b_j): where the exponential loss's estimate has a finite variance
        (inf for a feature without noise)."""
        noised = self.scale > 0
        return np.where(noised, 0.5 / np.where(noised, self.scale, 1.0), np.inf)

    @property
    def energy_limit(self) -> float:
        """min_j E*_j, E*_j = Var_j / (4 b_j^2) = a (ln a)^2 / (2 (1 - a)^2): a cap on the noise
        energy sum_j Var_j theta_j^2 below it keeps every |theta_j| < 1/(2 b_j)."""
        noised = self.scale > 0
        if not np.any(noised):
            return math.inf
        return float(np.min(self.variance[noised] / (4.0 * self.scale[noised] ** 2)))

    def default_variance_cap(self) -> float:
        """DEFAULT_REGION_FRACTION^2 * energy_limit: |theta_j| <= 0.9 / (2 b_j) when one coordinate
        carries all the energy."""
        return DEFAULT_REGION_FRACTION**2 * self.energy_limit

    # ---- the learner's protocol (noise_registry.LearnerLaw) --------------------------------
    @property
    def inverse(self) -> str:
        """The kernels' key of its own inverse (its record's ``inverse``)."""
        return record_of_law(self.law).inverse

    def inverse_for(self, loss: str) -> str | None:
        """"product" (exponential), "variance" (the parabolas) or None: its record's table."""
        return record_of_law(self.law).inverse_for(loss)

    def refusal(self, loss: str) -> str:
        return record_of_law(self.law).refusal.format(loss=loss)

    def check_cap(self, variance_cap: float, name: str = "variance_cap") -> None:
        """Refuse a cap that lets a coordinate leave the finite-variance region."""
        check_laplace_cap(self, variance_cap, name)

    def kernel_noise(self) -> np.ndarray:
        """What the kernel's LAW_LAPLACE branch reads: (Var | c | L), 3 blocks of p."""
        return np.ascontiguousarray(np.concatenate([self.variance, self.curvature_constant,
                                                    self.grid]))

    def pmf(self, k) -> np.ndarray:
        """P(Z_j = k), shape (p, len(k)): row j for feature j (integers k)."""
        k = np.abs(np.atleast_1d(np.asarray(k)))[None, :]
        a = self.alpha[:, None]
        return (self.one_minus_alpha[:, None] / (1.0 + a)) * a**k

    def characteristic(self, t) -> np.ndarray:
        """E[exp(i t Z_j)] = (1 - a)^2 / (1 - 2 a cos t + a^2), shape (p, len(t)) (real: Z is
        symmetric)."""
        t = np.atleast_1d(np.asarray(t, dtype=np.float64))[None, :]
        a = self.alpha[:, None]
        return self.one_minus_alpha[:, None]**2 / (1.0 - 2.0 * a * np.cos(t) + a * a)

    def exponential_factor(self, theta) -> tuple[np.ndarray, np.ndarray]:
        """Per coordinate (log kappa_j, -d log kappa_j / d theta_j) at ``theta``.

        kappa_j = 1 - 4 c_j sinh^2(h/2), h = L_j theta_j; -kappa_j' / kappa_j = 2 c_j L_j sinh(h) /
        kappa_j (the Gaussian's s_j theta_j).  Raises where kappa_j <= 0 (|theta_j| >= b_j).
        """
        theta = np.asarray(theta, dtype=np.float64)
        c = self.curvature_constant
        h = self.grid * theta
        kappa = 1.0 - 4.0 * c * np.sinh(0.5 * h) ** 2
        if np.any(kappa <= 0.0):
            j = int(np.argmax(kappa <= 0.0))
            raise InvalidInputError(
                f"theta[{j}] = {theta[j]:g} is outside the region |theta_j| < 1/b_j = "
                f"{1.0 / self.scale[j]:g} where the Laplace release's exponential loss has a finite "
                "expectation; keep theta inside it (the learner's variance cap does)")
        return np.log(kappa), 2.0 * c * self.grid * np.sinh(h) / kappa

    def lattice(self, j: int, tail: float = 1e-17) -> np.ndarray:
        """Integers k with |k| <= K for feature j, P(|Z_j| > K) <= ``tail`` (for exact summation
        over the lattice in tests)."""
        a = float(self.alpha[j])
        if a == 0.0:                            # no noise: Z = 0
            return np.zeros(1, dtype=np.int64)
        # P(|Z| > K) = 2 a^(K+1) / (1 + a)
        reach = max(1, math.ceil(math.log(tail / 2.0) / math.log(a)))
        return np.arange(-reach, reach + 1)


class GaussianLaw(LearnerLaw):
    """The Gaussian law of the features' noise (variances ``variance``, numbers or (p,)): the
    learner's view (``noise_registry.LearnerLaw``) of every law whose inverse reads the
    variances only.  Every loss is debiased by the inverse-Weierstrass series with tau =
    1/2 sum_j s_j theta_j^2 ("variance"); its own inverse of exp(-v), prod_j exp(-s_j
    theta_j^2 / 2), is that same tau; no finite-variance region (cap inf)."""

    inverse = "gaussian"

    def __init__(self, variance):
        self._variance = np.atleast_1d(np.asarray(variance, dtype=np.float64))

    @property
    def variance(self) -> np.ndarray:
        return self._variance

    def broadcast(self, p: int) -> GaussianLaw:
        return self if self._variance.size == p else GaussianLaw(np.broadcast_to(self._variance, (p,)))

    def inverse_for(self, loss: str) -> str | None:
        return "variance"

    def refusal(self, loss: str) -> str:
        return f"loss={loss!r} is debiased under Gaussian noise"       # (never refused)

    def exponential_factor(self, theta) -> tuple[np.ndarray, np.ndarray]:
        theta = np.asarray(theta, dtype=np.float64)
        return -0.5 * self._variance * theta * theta, self._variance * theta

    def default_variance_cap(self) -> float:
        return math.inf

    def check_cap(self, variance_cap: float, name: str = "variance_cap") -> None:
        return None

    def kernel_noise(self) -> np.ndarray:
        return np.ascontiguousarray(self._variance)


def check_laplace_cap(law: DiscreteLaplace, variance_cap: float, name: str = "variance_cap") -> None:
    """Refuse a cap that lets a coordinate leave the exponential loss's finite-variance region."""
    limit = law.energy_limit
    if not variance_cap < limit:
        raise InvalidInputError(
            f"{name}={variance_cap:g}: with a Laplace release the exponential loss needs a variance cap "
            f"below {limit:.6g} (sum_j Var_j theta_j^2; beyond it some |theta_j| can reach 1/(2 b_j), "
            f"where the estimate's variance is infinite); use {law.default_variance_cap():.6g} "
            "(DiscreteLaplace.default_variance_cap())")


def second_difference(f: Callable[[np.ndarray], np.ndarray], alpha: float, step: float
                      ) -> Callable[[np.ndarray], np.ndarray]:
    """D f(u) = [(1 + a^2) f(u) - a f(u + step) - a f(u - step)] / (1 - a)^2 (one coordinate).

    Straight from the definition (it cancels badly when a is close to 1: for tests on coarse
    grids, and to check the closed forms against)."""
    def inverse(u):
        u = np.asarray(u, dtype=np.float64)
        return ((1.0 + alpha * alpha) * f(u) - alpha * (f(u + step) + f(u - step))) / (1.0 - alpha)**2
    return inverse


def compose_inverse(f: Callable[[np.ndarray], np.ndarray], law: DiscreteLaplace, theta
                    ) -> Callable[[np.ndarray], np.ndarray]:
    """D_1 ... D_p f: the exact inverse of the noise theta^T (L Z) for any f (3^p evaluations)."""
    theta = np.asarray(theta, dtype=np.float64)
    law = law.broadcast(theta.size)
    g = f
    for j in range(theta.size):
        g = second_difference(g, float(law.alpha[j]), float(law.grid[j] * theta[j]))
    return g


def lattice_expectation(g: Callable[[np.ndarray], np.ndarray], u: float, law: DiscreteLaplace,
                        theta, tail: float = 1e-17) -> float:
    """E[g(u + sum_j theta_j L_j Z_j)] by summation over the lattice (mass beyond ``tail`` per
    coordinate left out), in math.fsum."""
    theta = np.asarray(theta, dtype=np.float64)
    law = law.broadcast(theta.size)
    shift = np.zeros(1)
    weight = np.ones(1)
    for j in range(theta.size):
        k = law.lattice(j, tail)
        pj = law.pmf(k)[j]
        shift = (shift[:, None] + theta[j] * law.grid[j] * k[None, :]).ravel()
        weight = (weight[:, None] * pj[None, :]).ravel()
    values = np.asarray(g(u + shift), dtype=np.float64)
    return math.fsum((weight * values).tolist())


def law_from_metadata(noise: dict, p: int, noised=None) -> DiscreteLaplace:
    """The learner's law of a discrete Laplace release from its metadata's ``noise`` block (grid
    and scale b, the same for every noised feature; scale 0, no noise, for a public one:
    ``noised`` is the features' noise variances, or None when every feature is noised).  The
    ``learner_law`` of the law's record in ``iwpfast.noise_registry``."""
    try:
        grid, scale = float(noise["grid"]), float(noise["scale"])
    except (KeyError, TypeError, ValueError):
        raise ReleaseSpecError(
            f"release metadata: noise {noise!r} names the discrete Laplace law without a numeric "
            "grid and scale; the release is corrupt, re-create it.") from None
    scales = np.full(p, scale) if noised is None else np.where(np.asarray(noised) > 0, scale, 0.0)
    return DiscreteLaplace(scales, np.full(p, grid))
