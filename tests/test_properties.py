"""Property tests of the math (hypothesis): identities that must hold for every input, checked on
many drawn ones.  ``derandomize=True``: the examples are a fixed function of the test, so a run
is repeatable (the project's rule of fixed seeds); ``max_examples`` keeps the suite fast.

- the label inverses of ``iwpfast.label_noise``: averaged over randomized response, the weighted
  pair S~ g(y~) + (1 - S~) g(-y~) is g(y) (binary), and the one-vs-rest weights of k-ary
  randomized response give back the clean loss of the head's binary problem;
- the engine's chunking invariance: how the rows are cut into chunks (the carried partial batch
  between calls) does not change the model, bit for bit, for the kernel and its NumPy twin.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iwpfast.label_noise import (
    kary_probabilities,
    keep_probability,
    label_tilde,
    label_weight_table,
)
from iwpfast.sgd.engine import finish, run_chunk
from iwpfast.sgd.reference import reference_finish, reference_run_chunk
from iwpfast.sgd.state import HeadState
from tests.conftest import make_head_config, make_linear_data

REPEATABLE = settings(derandomize=True, deadline=None, max_examples=60)

# budgets from very private to nearly public (e^-eps stays well above float64's epsilon)
epsilons = st.floats(min_value=0.01, max_value=20.0, allow_nan=False)
# values of a function g of the label (a loss at the two margins)
values = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False)


def _close(a: float, b: float, scale: float) -> bool:
    # the identities are exact in real arithmetic; in floats each side carries a few roundings
    # of terms as large as ``scale`` (the weights grow like 1/eps for small eps)
    return abs(a - b) <= 1e-12 * scale + 1e-300


@REPEATABLE
@given(eps=epsilons, g_plus=values, g_minus=values)
def test_binary_inverse_is_unbiased_for_any_function_of_the_label(eps, g_plus, g_minus):
    """E[S~ g(y~) + (1 - S~) g(-y~) | y] = g(y) for y = +1 and y = -1 (S = keep probability)."""
    s, t = keep_probability(eps), label_tilde(eps)
    assert 0.5 < s < 1.0 and t > 1.0
    assert t == pytest.approx(s / (2.0 * s - 1.0), rel=1e-12)
    scale = 4.0 * t * (abs(g_plus) + abs(g_minus)) + 1.0
    for g_y, g_other in ((g_plus, g_minus), (g_minus, g_plus)):
        kept = t * g_y + (1.0 - t) * g_other            # y~ = y
        flipped = t * g_other + (1.0 - t) * g_y         # y~ = -y
        assert _close(s * kept + (1.0 - s) * flipped, g_y, scale)


@REPEATABLE
@given(eps=epsilons, k=st.integers(min_value=2, max_value=60), f_u=values, f_minus_u=values)
def test_one_vs_rest_weights_give_back_the_clean_loss(eps, k, f_u, f_minus_u):
    """Head c of k-ary randomized response (keep q, each other class r): with the table's
    weights (F(z), F(-z)) of a row released as class c (z = u) or as another class (z = -u),
    the expected weighted loss is F(u) when the true class is c and F(-u) when it is not."""
    q, r = kary_probabilities(eps, k)
    assert q + (k - 1) * r == pytest.approx(1.0, rel=1e-12) and q > r > 0.0
    match_z, match_minus_z, other_z, other_minus_z = label_weight_table(eps, k)
    released_match = match_z * f_u + match_minus_z * f_minus_u       # released class is c
    released_other = other_z * f_minus_u + other_minus_z * f_u       # released class is not c
    scale = 4.0 * (abs(match_z) + abs(match_minus_z) + abs(other_z) + abs(other_minus_z)) \
        * (abs(f_u) + abs(f_minus_u)) + 1.0
    # true class c: released as c with q, as one of the k - 1 others with (k - 1) r
    assert _close(q * released_match + (k - 1) * r * released_other, f_u, scale)
    # true class d != c: released as c with r, as anything else with 1 - r
    assert _close(r * released_match + (1.0 - r) * released_other, f_minus_u, scale)
    if k == 2:      # the binary inverse, bit for bit
        t = label_tilde(eps)
        assert (match_z, match_minus_z, other_z, other_minus_z) == (t, 1.0 - t, t, 1.0 - t)


def _cuts(n: int, fractions: list[float]) -> list[int]:
    """Chunk boundaries 0 < ... < n from fractions of n (empty chunks allowed)."""
    return sorted({0, n, *(int(f * n) for f in fractions)})


@settings(derandomize=True, deadline=None, max_examples=25)
@given(loss=st.sampled_from(["exponential", "logistic", "quadratic", "squared_error"]),
       batch_size=st.integers(min_value=1, max_value=40),
       n=st.integers(min_value=1, max_value=400),
       fractions=st.lists(st.floats(min_value=0.0, max_value=1.0), max_size=6),
       private_labels=st.booleans(), averaged=st.booleans())
def test_the_model_does_not_depend_on_how_the_rows_are_chunked(loss, batch_size, n, fractions,
                                                                private_labels, averaged):
    """One call over all rows, or any cut of them into chunks (the rows short of a batch are
    carried from call to call): the same state, bit for bit, for the kernel and for its twin."""
    regression = loss == "squared_error"
    X, y = make_linear_data(n, 3, regression=regression, layout="features")
    cfg = make_head_config(loss=loss, batch_size=batch_size, average_start=0 if averaged else -1,
                           label_keep_prob=0.8 if private_labels and not regression else None,
                           learning_rate=0.02)
    cuts = _cuts(n, fractions)
    for run, fin in ((run_chunk, finish), (reference_run_chunk, reference_finish)):
        whole = HeadState.new(cfg)
        run(cfg, whole, X, y)
        fin(cfg, whole)
        pieces = HeadState.new(cfg)
        for a, b in zip(cuts[:-1], cuts[1:], strict=True):
            run(cfg, pieces, X[:, a:b], y[a:b])
        fin(cfg, pieces)
        # the carry buffers are scratch beyond their first carry_n rows (0 after finish)
        n_carried = whole.carry_n
        assert pieces.carry_n == n_carried
        for key, value in whole.arrays().items():
            got = pieces.arrays()[key]
            if key in ("carry_X", "carry_y"):
                value, got = value[..., :n_carried], got[..., :n_carried]
            np.testing.assert_array_equal(got, value, err_msg=f"{loss} {key}")
