"""Scalar loss derivatives and the inverse-Weierstrass series (iwpfast.losses)."""
import math
from decimal import Decimal, getcontext

import numpy as np
import pytest

from iwpfast.exceptions import InvalidInputError
from iwpfast.losses import (
    CLASSIFICATION_LOSSES,
    LOSS_RECORDS,
    LOSSES,
    REGRESSION_LOSSES,
    derivative,
    eulerian_numbers,
    loss_record,
    series_F,
    sigmoid_derivative,
)


def test_registry_is_the_contract():
    assert LOSSES == ("exponential", "quadratic", "logistic", "squared_error")
    assert set(CLASSIFICATION_LOSSES) | set(REGRESSION_LOSSES) == set(LOSSES)


def test_eulerian_numbers():
    assert eulerian_numbers(1) == (1,)
    assert eulerian_numbers(4) == (1, 11, 11, 1)
    assert eulerian_numbers(5) == (1, 26, 66, 26, 1)
    for n in range(1, 15):
        assert sum(eulerian_numbers(n)) == math.factorial(n)


def _sigmoid_derivative_decimal(n: int, v: float) -> Decimal:
    """S^(n)(v) in 400-digit decimal arithmetic, as a polynomial in S (S' = S(1-S)).

    The polynomial form cancels catastrophically at large |v| in float64, which is exactly why the
    library does not use it; with 400 digits the cancellation (at most ~330 digits at |v| = 745)
    leaves >= 70 correct digits, so this is an independent high-precision reference.
    """
    getcontext().prec = 400
    s = 1 / (1 + (-Decimal(v)).exp())
    poly = [Decimal(0), Decimal(1)]                    # coefficients of S^(0) = S in powers of S
    for _ in range(n):
        dpoly = [i * c for i, c in enumerate(poly)][1:]     # P'(S)
        # P'(S) * (S - S^2)
        new = [Decimal(0)] * (len(dpoly) + 2)
        for i, c in enumerate(dpoly):
            new[i + 1] += c
            new[i + 2] -= c
        poly = new
    return sum(c * s ** i for i, c in enumerate(poly))


@pytest.mark.parametrize("v", [-745.0, -700.0, -40.0, -12.5, -3.0, -0.3, 0.0, 0.3, 3.0, 12.5,
                               40.0, 700.0, 745.0])
def test_sigmoid_derivatives_match_high_precision_without_cancellation(v):
    got = np.array([float(sigmoid_derivative(n, v)) for n in range(13)])
    exact = [_sigmoid_derivative_decimal(n, v) for n in range(13)]
    for n in range(13):
        ref = float(exact[n])
        # relative 1e-12, plus an absolute floor at the scale of the Eulerian terms (n!/2^(n+1),
        # relevant only next to a zero of S^(n)) times machine epsilon, and the subnormal range
        tol = 1e-12 * abs(ref) + 4e-16 * math.factorial(n) / 2 ** (n + 1) * math.exp(-abs(v)) + 1e-320
        assert abs(got[n] - ref) <= tol, (n, v, got[n], ref)


def test_logistic_derivatives_are_sigmoid_derivatives_and_stable():
    v = np.array([-800.0, -40.0, -1.0, 0.0, 2.0, 40.0, 800.0])
    assert np.allclose(derivative("logistic", 0, v), np.logaddexp(0.0, -v), rtol=1e-15, atol=0)
    # f'(v) = -S(-v): at v = 40 this is -e^{-40}/(1+e^{-40}) to full relative precision
    assert derivative("logistic", 1, 40.0) == pytest.approx(-math.exp(-40.0), rel=1e-15)
    assert derivative("logistic", 1, -40.0) == pytest.approx(-1.0 + math.exp(-40.0), rel=1e-15)
    for n in range(2, 9):
        assert np.array_equal(derivative("logistic", n, v), sigmoid_derivative(n - 1, v))


@pytest.mark.parametrize("loss", list(LOSSES))
def test_derivatives_match_central_finite_differences(loss):
    v = np.linspace(-3.0, 3.0, 13) + 0.1
    h = 1e-5
    for n in range(0, 7):
        fd = (derivative(loss, n, v + h) - derivative(loss, n, v - h)) / (2 * h)
        # error of the central difference ~ h^2 f'''/6 + eps f / h: 1e-9 relative is ample
        assert np.allclose(derivative(loss, n + 1, v), fd, rtol=1e-7, atol=1e-8), (loss, n)


def test_closed_form_derivatives():
    v = np.array([-2.0, 0.5, 3.0])
    assert np.array_equal(derivative("exponential", 3, v), -np.exp(-v))
    assert np.array_equal(derivative("quadratic", 0, v), 0.5 * (v - 1) ** 2)
    assert np.array_equal(derivative("quadratic", 2, v), np.ones(3))
    assert np.array_equal(derivative("quadratic", 3, v), np.zeros(3))
    assert np.array_equal(derivative("squared_error", 1, v), v)


def _series_by_definition(loss, j, v, tau, top):
    return sum((-tau) ** k / math.factorial(k) * derivative(loss, 2 * k + j, v) for k in range(top + 1))


@pytest.mark.parametrize("loss", ["exponential", "quadratic", "squared_error"])
def test_closed_forms_equal_the_convergent_series(loss):
    v = np.linspace(-2, 2, 9)
    for j in (0, 1, 2):
        assert np.allclose(series_F(loss, j, v, 0.7), _series_by_definition(loss, j, v, 0.7, 40),
                           rtol=1e-13, atol=1e-14)


def test_logistic_truncation_convention():
    v = np.linspace(-4, 4, 17)
    tau = 0.8
    for K in range(0, 5):
        for j in (0, 1):
            assert np.allclose(series_F("logistic", j, v, tau, K),
                               _series_by_definition("logistic", j, v, tau, K), rtol=1e-14, atol=1e-15)
        expected_f2 = _series_by_definition("logistic", 2, v, tau, K - 1) if K else np.zeros_like(v)
        assert np.allclose(series_F("logistic", 2, v, tau, K), expected_f2, rtol=1e-14, atol=1e-15)
        # (F_1, F_2) is the exact gradient of F_0: dF_0/dv = F_1 and dF_0/dtau = -F_2
        h = 1e-6
        dv = (series_F("logistic", 0, v + h, tau, K) - series_F("logistic", 0, v - h, tau, K)) / (2 * h)
        dt = (series_F("logistic", 0, v, tau + h, K) - series_F("logistic", 0, v, tau - h, K)) / (2 * h)
        assert np.allclose(dv, series_F("logistic", 1, v, tau, K), atol=1e-8)
        assert np.allclose(dt, -series_F("logistic", 2, v, tau, K), atol=1e-8)


def test_bad_names_and_orders_are_rejected_with_the_choices():
    with pytest.raises(InvalidInputError, match="exponential, quadratic, logistic, squared_error"):
        derivative("hinge", 1, 0.0)
    with pytest.raises(InvalidInputError, match="truncation"):
        series_F("logistic", 1, 0.0, 1.0, -1)
    with pytest.raises(InvalidInputError, match="n="):
        derivative("logistic", 1.5, 0.0)


# ---------------------------------------------------------------- the loss records


@pytest.mark.parametrize("name", LOSSES)
def test_record_facts_agree_with_its_derivatives(name):
    """What the record states about f (f''(0), |f'(0)|, the bounds on |f'| and f'') is what its
    derivative function computes: a new loss's record is checked by the same test."""
    record = loss_record(name)
    assert record.name == name and record.task in ("classification", "regression")
    assert (name in CLASSIFICATION_LOSSES) == (record.task == "classification")
    zero = np.zeros(1)
    assert float(record.derivative(2, zero)[0]) == record.f2_at_0
    if record.slope_at_0 is not None:
        assert abs(float(record.derivative(1, zero)[0])) == record.slope_at_0
    else:
        assert record.task == "regression"        # |f'(0)| = |y|: the target bound stands in
    # the Laplace inverse a record states: "variance" is exact for a parabola only (third
    # derivative 0), "product" for f = exp(-v) (f'' = f), None: no closed inverse
    grid = np.linspace(-3.0, 3.0, 61)
    if record.laplace == "variance":
        assert np.all(record.derivative(3, grid) == 0.0)
    elif record.laplace == "product":
        np.testing.assert_array_equal(record.derivative(2, grid), record.derivative(0, grid))
    target_bound = 1.5
    for zmax in (0.5, 2.0, 6.0):
        v = np.linspace(-zmax, zmax, 2001)
        fp_max, fpp_max = record.derivative_bounds(zmax, target_bound)
        # a regression loss is f(u - y) with |y| <= target_bound: its residuals reach zmax + that
        r = np.linspace(-zmax - target_bound, zmax + target_bound, 2001) \
            if record.task == "regression" else v
        assert np.max(np.abs(record.derivative(1, r))) <= fp_max * (1 + 1e-12)
        assert np.max(record.derivative(2, r)) <= fpp_max * (1 + 1e-12)


@pytest.mark.parametrize("name", LOSSES)
def test_record_fast_forms_match_the_series_and_derivatives(name):
    record = LOSS_RECORDS[name]
    v = np.random.default_rng(3).normal(scale=3.0, size=500)
    for tau, K in ((0.0, 0), (0.3, 2), (1.1, 3)):
        a, c = record.both_series(v, tau, K)           # the same bits as two series calls
        np.testing.assert_array_equal(a, series_F(name, 1, v, tau, K))
        np.testing.assert_array_equal(c, series_F(name, 2, v, tau, K))
    f, fp, fpp = record.value_and_slopes(v)            # the solvers' (f, f', f'')
    for n, got in enumerate((f, fp, fpp)):
        np.testing.assert_allclose(got, derivative(name, n, v), rtol=1e-12, atol=1e-300)
    if record.smoothed is not None:
        # E f(v + sqrt(2 tau) Z) by Gauss-Hermite quadrature (exact for these closed forms up to
        # rounding: the integrands are polynomials or exp, which 60 nodes integrate to 1e-12)
        nodes, weights = np.polynomial.hermite_e.hermegauss(60)
        weights = weights / weights.sum()
        tau = 0.4
        quad = sum(w * derivative(name, 0, v + math.sqrt(2 * tau) * z)
                   for z, w in zip(nodes, weights, strict=True))
        np.testing.assert_allclose(record.smoothed(v, tau), quad, rtol=1e-10)


def test_loss_record_names_the_choices():
    with pytest.raises(InvalidInputError, match="choose one of exponential, quadratic, logistic"):
        loss_record("hinge")
    assert loss_record("logistic").truncated and loss_record("exponential").heavy_tailed
