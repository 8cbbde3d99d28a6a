"""Issue 14: the private-risk diagnostics, `plan`, and the tuning engine (grid, split, choice)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from iwpfast.cli import main
from iwpfast.estimates import RiskAccumulator, noise_variance_factor
from iwpfast.planning import plan_release
from iwpfast.privacy import ReleaseSpec
from iwpfast.sgd.choice import select
from iwpfast.sgd.grid import GridPoint, default_grid
from iwpfast.sgd.split import _split_counts, make_split, validation_period


# ------------------------------------------------------------------ the accumulator
def test_accumulator_matches_numpy_over_uneven_batches():
    rng = np.random.default_rng(1)
    v = rng.lognormal(size=(1000, 3))
    acc = RiskAccumulator(3)
    for lo, hi in [(0, 7), (7, 300), (300, 301), (301, 1000)]:
        acc.add(v[lo:hi])
    est = acc.estimates("quadratic", [0.0, 0.5, 1.0])
    for j in range(3):
        assert est[j].risk == pytest.approx(v[:, j].mean(), rel=1e-12)
        assert est[j].stderr == pytest.approx(v[:, j].std(ddof=1) / math.sqrt(1000), rel=1e-10)
        a = np.abs(v[:, j])
        assert est[j].largest_share == pytest.approx(a.max() / a.sum(), rel=1e-12)
        assert est[j].effective_rows == pytest.approx(a.sum() ** 2 / (a * a).sum(), rel=1e-10)
    cov = acc.covariance_of_means()
    assert np.allclose(cov, np.cov(v.T) / 1000, rtol=1e-10)


def test_reliable_estimate_shows_interval_unreliable_does_not():
    rng = np.random.default_rng(2)
    good = RiskAccumulator(1)
    good.add(rng.exponential(size=5000))
    est = good.estimates("exponential", 0.1)[0]
    assert est.reliable and est.ci95 is not None and "95% CI" in est.describe()
    # one huge row among many small ones: the estimate is that row
    bad = RiskAccumulator(1)
    bad.add(np.r_[np.full(5000, 0.01), 1e4])
    est = bad.estimates("exponential", 0.1)[0]
    assert not est.reliable and est.ci95 is None
    assert "UNRELIABLE" in est.describe() and "95% CI" not in est.describe()
    # a large sigma^2|theta|^2 for the exponential loss flags even well-behaved looking values
    big = RiskAccumulator(1)
    big.add(rng.exponential(size=5000))
    est = big.estimates("exponential", 12.0)[0]   # exp(12) * 100 > 5000 rows
    assert not est.reliable and any("exp(12)" in w for w in est.warnings)
    assert noise_variance_factor("exponential", 12.0) == pytest.approx(math.exp(12.0))


def test_interval_below_zero_is_flagged():
    acc = RiskAccumulator(1)
    acc.add(np.r_[np.full(900, -0.5), np.full(100, 5.0)])  # mean 0.05, standard error 0.055
    est = acc.estimates("quadratic", 0.0)[0]
    assert not est.reliable and any("below 0" in w for w in est.warnings)


# ------------------------------------------------------------------ plan
@pytest.mark.parametrize("eps_x,eps_y,delta,bound,p,cal", [
    (4.0, 2.0, 1e-5, 2.0, 5, "analytic"), (1.0, 1.0, 1e-6, 1.0, 10, "analytic"),
    (0.5, None, 1e-5, 1.5, 3, "classic")])
def test_plan_sigma_and_keep_prob_equal_the_release(eps_x, eps_y, delta, bound, p, cal):
    plan = plan_release(epsilon_x=eps_x, epsilon_y=eps_y, delta=delta, bound=bound, n_features=p,
                        calibration=cal)
    feats = [f"f{j}" for j in range(p)]
    spec = ReleaseSpec(epsilon_x=eps_x, epsilon_y=eps_y, delta=delta, bound=bound, features=feats,
                       ranges={f: (0.0, 10.0) for f in feats}, label="y", calibration=cal)
    assert plan.sigma == spec.sigma
    assert plan.label_keep_prob == spec.label_keep_prob


def test_plan_cli_matches_a_real_release(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(3)
    pq.write_table(pa.table({"a": rng.uniform(0, 9, 200), "b": rng.uniform(0, 9, 200),
                             "y": rng.integers(0, 2, 200)}), tmp_path / "raw.parquet")
    assert main(["release", str(tmp_path / "raw.parquet"), str(tmp_path / "rel.parquet"),
                 "--features", "a", "b", "--ranges", "a=0:9", "b=0:9", "--label", "y",
                 "--epsilon-x", "3", "--epsilon-y", "1.5", "--delta", "1e-6", "--bound", "1.2",
                 "--seed", "1", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["plan", "--epsilon-x", "3", "--epsilon-y", "1.5", "--delta", "1e-6",
                 "--bound", "1.2", "--features", "2", "--rows", "200", "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    from iwpfast.privacy import read_release_spec
    spec = read_release_spec(tmp_path / "rel.parquet")
    assert planned["sigma"] == pytest.approx(spec.sigma, rel=1e-12)
    assert planned["label_keep_prob"] == pytest.approx(spec.label_keep_prob, rel=1e-12)
    assert main(["plan", "--epsilon-x", "3", "--epsilon-y", "1.5", "--features", "2",
                 "--rows", "200"]) == 0
    text = capsys.readouterr().out
    assert "sigma:" in text and "keep prob." in text and "r_min" in text


def test_plan_rows_needed_and_detectable_correlation_agree():
    plan = plan_release(epsilon_x=4, epsilon_y=2, delta=1e-5, bound=2, n_features=5, n_rows=32561)
    r = plan.detectable_correlation()
    # the rows needed for r_min are the rows given (up to the ceiling)
    assert plan.rows_needed(r) == pytest.approx(32561, abs=1)
    # the exponential loss's factor grows like exp(sigma^2 |theta|^2)
    f1, f2 = plan.gradient_variance_factor(0.5), plan.gradient_variance_factor(1.0)
    assert f2 / f1 == pytest.approx(math.exp(plan.sigma ** 2 * (1.0 - 0.25)), rel=1e-9)


def test_plan_bad_input_is_one_line(capsys):
    assert main(["plan", "--epsilon-x", "0", "--features", "3"]) == 2
    assert capsys.readouterr().err.startswith("iwpfast: error: ")
    assert main(["plan", "--epsilon-x", "1", "--features", "3", "--loss", "squared_error",
                 "--task", "classification"]) == 2


# ------------------------------------------------------------------ split
@pytest.mark.parametrize("n", [1, 57, 1000, 12345])
def test_split_parts_partition_the_rows(n):
    import pyarrow as pa
    table = pa.table({"i": np.arange(n), "y": np.ones(n)})
    train, val = make_split(pa.Table.from_batches(table.to_batches(max_chunksize=97)), 0.1)
    got_t = np.concatenate([b.column("i").to_numpy() for b in train.batches(["i"])] or [np.zeros(0)])
    got_v = np.concatenate([b.column("i").to_numpy() for b in val.batches(["i"])] or [np.zeros(0)])
    assert sorted(np.r_[got_t, got_v].tolist()) == list(range(n))
    assert len(got_t) == train.num_rows and len(got_v) == val.num_rows
    assert (len(got_t), len(got_v)) == _split_counts(n, train.period, train.block)
    if n >= 1000:  # the hold-out is spread over the file, about a tenth of it
        assert abs(len(got_v) / n - 0.1) < 0.02 and got_v.min() < n / 2 < got_v.max()
    # start_row counts the part's own rows (what the driver's resume uses)
    if train.num_rows > 10:
        again = np.concatenate([b.column("i").to_numpy() for b in train.batches(["i"], start_row=10)])
        assert np.array_equal(again, got_t[10:])


def test_validation_fraction_is_checked():
    assert validation_period(0.1) == 10 and validation_period(0.5) == 2
    with pytest.raises(Exception, match="validation_fraction"):
        validation_period(0.0)


# ------------------------------------------------------------------ grid and choice
def test_the_grid_spans_the_noise_scaled_step():
    pts = default_grid(loss="logistic", n_rows=32561, bound=2.0, batch_size=128, noise_var=1.0,
                       label_keep_prob=0.88, n_features=5, variance_cap=2.0,
                       radius_of=lambda a: 1.0 / a)
    assert len(pts) == 28 and len({p.name for p in pts}) == len(pts)
    assert all(p.learning_rate > 0 and p.alpha > 0 for p in pts)
    # issue 33: no worst-case cap; 7 steps per alpha, 3 decades around the noise-scaled step
    # h = p / (f''(0) B^2) / sqrt(L F G): here L = 1/(2*0.88-1)^2, F = 1 + 5/4, G = 1 (logistic)
    from iwpfast.sgd.grid import step_scale
    h = 5 / (0.25 * 4.0) / math.sqrt(1 / 0.76 ** 2 * 2.25)
    for a in {p.alpha for p in pts}:
        steps = sorted(p.learning_rate for p in pts if p.alpha == a)
        assert steps[-1] == pytest.approx(h * 10 ** 0.5) and steps[0] == pytest.approx(h * 10 ** -2.5)
        assert step_scale(loss="logistic", alpha=a, bound=2.0, noise_var=1.0, label_keep_prob=0.88,
                          n_features=5, radius=1.0) == pytest.approx(h)


class _E:
    def __init__(self, risk, stderr, reliable=True, energy=0.0):
        self.risk, self.stderr, self.reliable, self.noise_energy = risk, stderr, reliable, energy


def test_select_standard_error_rule():
    from iwpfast.sgd.choice import SE_RULE, SE_RULE_MULTIPLIER
    assert SE_RULE_MULTIPLIER == 0.5
    pts = [GridPoint(0.1, 0.01), GridPoint(1.0, 0.01), GridPoint(10.0, 0.01), GridPoint(0.01, 0.1)]
    est = [_E(0.50, 0.02), _E(0.508, 0.02), _E(0.60, 0.02), _E(0.10, 0.01, reliable=False, energy=9)]
    i, rule, notes = select(pts, est)
    # 0.4 SE above the best, more regularized: chosen; the unreliable 0.10 is discarded
    assert i == 1 and rule == SE_RULE
    assert notes and "discarded" in notes[0]
    # 0.6 SE above the best: outside half an SE (the classic one-SE rule would take it)
    est[1] = _E(0.512, 0.02)
    i, _, _ = select(pts, est)
    assert i == 0
    # paired standard errors: a near-perfectly correlated pair is told apart by a tiny difference
    cov = np.full((4, 4), 0.0004) + np.eye(4) * 1e-8
    i, _, _ = select(pts, est, cov)
    assert i == 0
    # no reliable head: the least heavy-tailed one, with a note
    est = [_E(0.5, 0.1, False, 3.0), _E(0.4, 0.1, False, 1.0), _E(0.3, 0.1, False, 2.0),
           _E(0.2, 0.1, False, 5.0)]
    i, rule, notes = select(pts, est)
    assert i == 1 and "fallback" in rule and "no head" in notes[0]
