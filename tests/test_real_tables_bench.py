"""bench/real_tables.py's yardsticks: the honest manual baseline is not optimistic where the
oracle is, and the bench's copy of the final-choice rule is the library's ``select``."""
import math
import os
import sys

import numpy as np

from iwpfast.estimates import RiskEstimate
from iwpfast.sgd.choice import SE_RULE_MULTIPLIER, select
from iwpfast.sgd.grid import GridPoint

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "bench"))
import real_tables  # noqa: E402


def test_the_honest_baseline_removes_the_oracles_selection_optimism():
    # 21 heads that are each right on a row with probability 0.7, independently: every head is
    # worth 0.7; the oracle (best of 21 on the rows it is scored on) is biased up by about
    # E[max of 21 normals] = 1.89 sd = 1.89 sqrt(0.21 / 2000) = 0.019; the honest figure (chosen
    # on one half, scored on the other) is unbiased, with an sd below one half's,
    # sqrt(0.21 / 1000) = 0.0145: within 3 of those of 0.7
    rng = np.random.default_rng(0)
    correct = rng.random((21, 2000)) < 0.7
    oracle = correct.mean(axis=1).max()
    honest = real_tables.honest_manual(correct)
    assert abs(honest - 0.7) <= 3 * math.sqrt(0.21 / 1000)
    assert oracle - honest >= 0.01, (oracle, honest)
    # a head better on every row is found on either half: no loss
    correct[5] = True
    assert real_tables.honest_manual(correct) == 1.0


def test_the_bench_rule_is_the_library_rule():
    # --rules scores variants of select's rule on the heads a scan kept; its copy at the
    # multiplier in force must pick what select picks (else "in force" would compare nothing)
    rule = real_tables.one_se_rule(SE_RULE_MULTIPLIER)
    rng = np.random.default_rng(1)
    points = [GridPoint(a, g) for a in (0.001, 0.01, 0.1, 1.0) for g in (0.01, 0.1, 1.0)]
    for _ in range(200):
        k = len(points)
        root = rng.normal(size=(k, k)) * 0.01
        cov = root @ root.T + np.eye(k) * 1e-6
        estimates = [RiskEstimate(float(r), float(math.sqrt(cov[j, j])), 1000,
                                  reliable=bool(rng.random() < 0.9))
                     for j, r in enumerate(0.9 + rng.normal(size=k) * 0.01)]
        if not any(e.reliable for e in estimates):
            continue
        assert rule(points, estimates, cov) == select(points, estimates, cov)[0]
