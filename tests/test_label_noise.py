"""iwpfast/label_noise.py: S, S~, k-ary (q, r) and the one-vs-rest label weights, defined once and
used by the release, the estimates, the transforms and HeadConfig."""
import math

import numpy as np
import pytest

from iwpfast import label_noise as ln
from iwpfast.exceptions import InvalidInputError


@pytest.mark.parametrize("eps", [0.1, 1.0, 2.5, 8.0])
def test_formulas(eps):
    s = ln.keep_probability(eps)
    assert s == pytest.approx(1 / (1 + math.exp(-eps)), rel=1e-15)
    assert ln.label_tilde(eps) == pytest.approx(s / (2 * s - 1), rel=1e-12)
    assert ln.label_tilde_from_keep(s) == pytest.approx(ln.label_tilde(eps), rel=1e-12)
    for k in (2, 3, 7):
        q, r = ln.kary_probabilities(eps, k)
        assert q + (k - 1) * r == pytest.approx(1.0, rel=1e-15) and q / r == pytest.approx(math.exp(eps))
    # k = 2 is the binary inverse: (S~, 1 - S~) for both rows of the table
    t = ln.label_tilde(eps)
    assert ln.label_weight_table(eps, 2) == pytest.approx((t, 1 - t, t, 1 - t))


def test_one_vs_rest_weights_are_unbiased():
    # E[w(y~) . (f(z), f(-z))] over k-ary randomized response = f(y_c z) for every true class
    eps, k, c = 1.3, 4, 2
    q, r = ln.kary_probabilities(eps, k)
    mz, mmz, oz, omz = ln.label_weight_table(eps, k)
    fz, fmz = 0.7, 2.9                                  # any values of f(z), f(-z)
    for true in range(k):
        probs = np.full(k, r)
        probs[true] = q
        expected = sum(p * ((mz * fz + mmz * fmz) if rep == c else (oz * fmz + omz * fz))
                       for rep, p in enumerate(probs))
        assert expected == pytest.approx(fz if true == c else fmz, rel=1e-12)


def test_public_labels_and_errors():
    assert ln.keep_probability(None) == ln.label_tilde(None) == ln.label_tilde(math.inf) == 1.0
    assert ln.label_weight_table(None, 5) == (1.0, 0.0, 1.0, 0.0)
    with pytest.raises(InvalidInputError, match="epsilon_y must be a finite number > 0.*None for public"):
        ln.keep_probability(-1.0)
    with pytest.raises(InvalidInputError, match=r"\(0.5, 1\]"):
        ln.label_tilde_from_keep(0.5)
    with pytest.raises(InvalidInputError, match="at least 2 classes"):
        ln.kary_probabilities(1.0, 1)
    assert ln.check_classes(np.array([3, 1, 2])) == (3, 1, 2)
    with pytest.raises(InvalidInputError, match="twice"):
        ln.check_classes(["a", "b", "a"])


def test_every_user_takes_them_from_here():
    from iwpfast import estimates, transforms
    from iwpfast.privacy import calibration, mechanisms

    assert transforms.keep_probability is ln.keep_probability
    assert estimates.label_tilde is ln.label_tilde and estimates.label_weight_table is ln.label_weight_table
    assert mechanisms.kary_probabilities is ln.kary_probabilities
    assert calibration.label_keep_probability(1.0) == ln.keep_probability(1.0)
    assert calibration.label_keep_probability(None) is None
