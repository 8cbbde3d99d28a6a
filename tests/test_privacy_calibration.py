import math
import warnings

import numpy as np
import pytest

from iwpfast.exceptions import InvalidInputError, PrivacyCalibrationWarning
from iwpfast.privacy import analytic_gaussian_delta, gaussian_noise_scale, label_keep_probability
from iwpfast.privacy.calibration import log_ndtr


def test_analytic_known_value_sensitivity_one():
    # docs/design.md section 1: analytic sigma for eps=1, delta=1e-5, Delta=1 is 3.7306 (Delta = 2 * bound).
    assert gaussian_noise_scale(1.0, 1e-5, 0.5) == pytest.approx(3.7306, abs=5e-5)


def test_classic_equals_paper_formula():
    for eps, delta, bound in [(0.5, 1e-5, 1.0), (1.0, 1e-6, 2.0), (0.1, 1e-3, 0.3)]:
        expected = math.sqrt(8.0 * math.log(1.25 / delta)) * bound / eps  # sigma^2 = 8 ln(1.25/d) B^2/eps^2
        assert gaussian_noise_scale(eps, delta, bound, "classic") == pytest.approx(expected, rel=1e-14)


def test_classic_warns_above_one_and_names_analytic():
    with pytest.warns(PrivacyCalibrationWarning, match="analytic"):
        gaussian_noise_scale(2.0, 1e-5, 1.0, "classic")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gaussian_noise_scale(1.0, 1e-5, 1.0, "classic")  # eps <= 1: no warning


@pytest.mark.parametrize("eps", [0.01, 0.3, 1.0, 2.0, 8.0, 50.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-10])
def test_analytic_is_smallest_sigma_meeting_the_condition(eps, delta):
    sigma = gaussian_noise_scale(eps, delta, 1.0)
    # rounded toward more noise: the returned sigma satisfies the condition ...
    assert analytic_gaussian_delta(sigma, eps, 2.0) <= delta
    # ... and a sigma 1e-9 smaller does not (bisection converged to the boundary)
    assert analytic_gaussian_delta(sigma * (1 - 1e-9), eps, 2.0) > delta


def test_analytic_below_classic_where_classic_is_valid():
    for eps in (0.1, 0.5, 1.0):
        a = gaussian_noise_scale(eps, 1e-5, 1.0)
        c = gaussian_noise_scale(eps, 1e-5, 1.0, "classic")
        assert a < c
        # the classic sigma is valid, so it satisfies the exact condition too
        assert analytic_gaussian_delta(c, eps, 2.0) <= 1e-5


def test_sigma_scales_linearly_with_bound():
    assert gaussian_noise_scale(1.0, 1e-5, 3.0) == pytest.approx(
        3 * gaussian_noise_scale(1.0, 1e-5, 1.0), rel=1e-9)


def test_log_ndtr_matches_erfc_and_asymptotics():
    for x in (-35.0, -30.5, -29.5, -5.0, 0.0, 2.0, 6.0):
        direct = math.log(0.5 * math.erfc(-x / math.sqrt(2)))
        assert log_ndtr(x) == pytest.approx(direct, rel=1e-12)
    # deep tail, beyond erfc's underflow: log Phi(x) = -x^2/2 - log(-x) - log(sqrt(2 pi))
    # + log(1 - 1/x^2 + O(x^-4)); at x = -1000 the O(x^-4) term is 3e-12 absolute.
    x = -1000.0
    expected = -x * x / 2 - math.log(-x) - 0.5 * math.log(2 * math.pi) + math.log1p(-1 / x**2)
    assert log_ndtr(x) == pytest.approx(expected, abs=1e-10)


def test_huge_epsilon_does_not_overflow():
    sigma = gaussian_noise_scale(800.0, 1e-5, 1.0)
    assert 0 < sigma < 0.1 and math.isfinite(sigma)


def test_keep_probability():
    assert label_keep_probability(None) is None
    assert label_keep_probability(1.0) == pytest.approx(1 / (1 + math.exp(-1)))
    # a keep probability that rounds to 1 would add no noise while epsilon_y is printed: refused
    with pytest.raises(InvalidInputError, match="rounds to 1"):
        label_keep_probability(1000.0)
    with pytest.raises(InvalidInputError, match="rounds to 1"):
        label_keep_probability(37.0)
    assert label_keep_probability(36.0) < 1.0


@pytest.mark.parametrize("kwargs, fix", [
    (dict(epsilon=0.0, delta=1e-5, bound=1.0), "epsilon"),
    (dict(epsilon=-1.0, delta=1e-5, bound=1.0), "epsilon"),
    (dict(epsilon=float("nan"), delta=1e-5, bound=1.0), "epsilon"),
    (dict(epsilon=1.0, delta=0.0, bound=1.0), "between 0 and 1"),
    (dict(epsilon=1.0, delta=1.0, bound=1.0), "between 0 and 1"),
    (dict(epsilon=1.0, delta=1e-5, bound=0.0), "bound"),
    (dict(epsilon=1.0, delta=1e-5, bound=-2.0), "bound"),
])
def test_bad_parameters_name_the_fix(kwargs, fix):
    with pytest.raises(InvalidInputError, match=fix):
        gaussian_noise_scale(**kwargs)


def test_bad_calibration_and_label_epsilon():
    with pytest.raises(InvalidInputError, match="analytic"):
        gaussian_noise_scale(1.0, 1e-5, 1.0, "exact")
    with pytest.raises(InvalidInputError, match="None for public labels"):
        label_keep_probability(0.0)


def test_numeric_hockey_stick_divergence_matches_delta():
    # Neighbour check of the Gaussian mechanism, numerically: for two inputs at the largest
    # distance Delta = 2B, delta(eps) = int max(0, phi(t) - e^eps phi(t - Delta)) dt along their
    # direction (the other directions cancel).  It must not exceed the target delta.
    for calibration, eps in (("analytic", 1.0), ("analytic", 4.0), ("classic", 0.5)):
        bound, delta = 1.0, 1e-5
        sigma = gaussian_noise_scale(eps, delta, bound, calibration)
        Delta = 2 * bound
        t = np.linspace(-12 * sigma, Delta + 12 * sigma, 2_000_001)
        def pdf(u, sigma=sigma):
            return np.exp(-0.5 * (u / sigma) ** 2) / (sigma * math.sqrt(2 * math.pi))
        gap = np.maximum(0.0, pdf(t) - math.exp(eps) * pdf(t - Delta))
        numeric = float(np.sum((gap[1:] + gap[:-1]) * 0.5 * np.diff(t)))
        assert numeric <= delta * (1 + 1e-4)
        if calibration == "analytic":
            assert numeric >= delta * (1 - 1e-3)  # tight: the analytic calibration spends all of delta
