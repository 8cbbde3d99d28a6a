"""Issue 20: the 'auto' grid's hopeless heads stopped early on the interleaved hold-out.

The driver's ``race`` hook (heads stopped mid-scan: the others keep their bits, the stopped ones
are the models at that row), the pruning rule of ``iwpfast.sgd.tuning._Race`` (only a head no
faster than j can prune j, by more than PRUNE_Z paired standard errors), the rows a rung scores
(held before the scan reaches it, whatever the reader's timing), and the estimator: the same
choice and the same bits as the full grid, pruned heads never chosen, reported in ``tuning_``.
"""
import math
import warnings

import numpy as np
import pyarrow as pa
import pytest

from iwpfast import IWPClassifier
from iwpfast.exceptions import InvalidInputError
from iwpfast.sgd import tuning
from iwpfast.sgd.driver import Head, fit_stream
from iwpfast.sgd.state import HeadConfig
from iwpfast.sgd.tuning import GridPoint, _Race

STATE_KEYS = ("theta", "theta_avg", "intercept", "intercept_avg", "counters", "carry_n")


def _table(n, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 3))
    y = np.where(X @ np.array([1.0, -0.5, 0.25]) + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return pa.table({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "y": y})


def _heads(steps, names=None):
    names = names or [f"h{i}" for i in range(len(steps))]
    return [Head(n, HeadConfig(loss="exponential", mode="clean", n_features=3,
                               noise_var=np.zeros(3), batch_size=16, learning_rate=lr, alpha=0.01,
                               radius=np.inf), ["a", "b", "c"], "y")
            for n, lr in zip(names, steps, strict=True)]


class _StopAt:
    """A race that stops the named heads at its rows, and records what it was shown."""

    def __init__(self, plan):
        self.plan = plan                 # {row: [names]}
        self.rows = sorted(plan)
        self.calls = []
        self.done = set()

    def prune(self, row, alive, states):
        self.calls.append((row, list(alive)))
        due = [r for r in self.rows if r <= row and r not in self.done]
        self.done.update(due)
        return [n for r in due for n in self.plan[r]]


STEPS = (0.01, 0.05, 0.02, 0.03, 0.04)


@pytest.mark.parametrize("engine", ["numba", "numpy"])
@pytest.mark.parametrize("threads", [1, 2])
def test_a_race_stops_heads_and_the_others_keep_their_bits(engine, threads):
    table = _table(3000)
    kw = dict(progress=False, engine=engine, head_threads=threads, chunk_rows=500)
    race = _StopAt({1000: ["h1", "h3"], 2000: ["h0"]})
    raced = fit_stream(table, _heads(STEPS), drop_diverged=True, race=race, **kw)
    assert raced.pruned == {"h1": 1000, "h3": 1000, "h0": 2000}
    assert raced.diverged == {}
    # each rung is taken at the end of the chunk reaching it, with the heads still running
    assert race.calls == [(1000, ["h0", "h1", "h2", "h3", "h4"]), (2000, ["h0", "h2", "h4"])]
    full = fit_stream(table, _heads(STEPS), **kw)
    for name in ("h2", "h4"):                  # survivors: the bits of the full scan
        for key in STATE_KEYS:
            np.testing.assert_array_equal(getattr(raced.states[name], key),
                                          getattr(full.states[name], key), err_msg=name)
    # a stopped head is the model of its first rows (its partial batch still carried)
    for name, row in raced.pruned.items():
        alone = fit_stream(table.slice(0, row), _heads([STEPS[int(name[1])]], [name]),
                           finish=False, **kw)
        for key in STATE_KEYS:
            np.testing.assert_array_equal(getattr(raced.states[name], key),
                                          getattr(alone.states[name], key), err_msg=name)


def test_a_race_never_stops_every_head_and_needs_drop_diverged():
    table = _table(1200)
    race = _StopAt({600: ["h0", "h1"]})
    kw = dict(progress=False, chunk_rows=300)
    result = fit_stream(table, _heads(STEPS[:2]), drop_diverged=True, race=race, **kw)
    assert result.pruned == {}                 # stopping all of them would leave no model
    with pytest.raises(InvalidInputError, match="race= needs drop_diverged=True"):
        fit_stream(table, _heads(STEPS[:2]), race=race, **kw)


@pytest.fixture
def dominance(monkeypatch):
    """The rung rule of issue 20 (``PRUNE_RULE = "dominance"``; the default is successive
    halving since issue 33): these tests are about it."""
    monkeypatch.setattr(tuning, "PRUNE_RULE", "dominance")


class _Held:
    def __init__(self, n_rows):
        self.n_rows = n_rows


def _race(points, estimates, cov, states=None):
    race = _Race({p.name: p for p in points}, _Held(10**6), period=10, block=100,
                 n_train=10**6, score=lambda n_val, alive, states: (estimates, cov))
    return race.prune(500_000, [p.name for p in points], states or {})


class _Telemetry:
    """A state whose telemetry says: `batches` batches, gradient norms of this mean and sd."""

    def __init__(self, mean, sd, batches=1001):
        from iwpfast._kernels.abi import TELEMETRY_FIELDS, TELEMETRY_INDEX
        self.telemetry = np.zeros(len(TELEMETRY_FIELDS))
        self.telemetry[TELEMETRY_INDEX["batches"]] = batches
        self.telemetry[TELEMETRY_INDEX["grad_norm_mean"]] = mean
        self.telemetry[TELEMETRY_INDEX["grad_norm_m2"]] = sd * sd * (batches - 1)


def test_a_faster_head_is_credited_the_iterate_noise_its_final_average_removes(monkeypatch,
                                                                              dominance):
    # gap 0.05 at 3.5 paired standard errors: pruned without the credit; with it the faster
    # head's extra (gamma/4) E|g|^2 = (0.004 - 0.001) / 4 * 100 = 0.075 covers the gap
    slow, fast = GridPoint(0.1, 0.001), GridPoint(0.1, 0.004)
    cov = np.array([[2e-4, 1e-4], [1e-4, 2e-4]])
    gap = 3.5 * math.sqrt(2e-4)
    states = {slow.name: _Telemetry(6.0, 8.0), fast.name: _Telemetry(6.0, 8.0)}  # E|g|^2 100
    estimates = [_estimate(0.5), _estimate(0.5 + gap)]
    monkeypatch.setattr(tuning, "PRUNE_CREDIT", "second_moment")
    assert _race([slow, fast], estimates, cov, states) == []
    # the lower bound Var|g| = 64 (the default): credit 0.048, the gap minus it is under 3 se
    monkeypatch.setattr(tuning, "PRUNE_CREDIT", "variance")
    assert _race([slow, fast], estimates, cov, states) == []
    states = {slow.name: _Telemetry(6.0, 2.0), fast.name: _Telemetry(6.0, 2.0)}  # Var|g| = 4
    assert _race([slow, fast], estimates, cov, states) == [fast.name]
    monkeypatch.setattr(tuning, "PRUNE_CREDIT", "none")
    assert _race([slow, fast], estimates, cov,
                 {slow.name: _Telemetry(6.0, 8.0), fast.name: _Telemetry(6.0, 8.0)}) == [fast.name]


def _estimate(risk, reliable=True):
    from iwpfast.estimates import RiskEstimate
    return RiskEstimate(risk, 0.01, 1000, reliable=reliable)


def test_only_a_slower_more_regularized_head_prunes_and_only_beyond_z_paired_errors(dominance):
    z = tuning.PRUNE_Z
    slow = GridPoint(0.1, 0.001)        # gamma 1e-3, gamma*alpha 1e-4
    fast = GridPoint(0.1, 0.004)        # faster: the slow one may prune it, never the reverse
    cov = np.array([[2e-4, 1e-4], [1e-4, 2e-4]])     # paired se sqrt(2e-4) = 0.01414
    se = math.sqrt(2e-4)
    worse = se * z * 1.01
    assert _race([slow, fast], [_estimate(0.5), _estimate(0.5 + worse)], cov) == [fast.name]
    assert _race([slow, fast], [_estimate(0.5 + worse), _estimate(0.5)], cov) == []
    # within z paired standard errors: kept
    assert _race([slow, fast], [_estimate(0.5), _estimate(0.5 + se * z * 0.99)], cov) == []
    # an unreliable estimate neither prunes nor is pruned
    assert _race([slow, fast], [_estimate(0.5, False), _estimate(0.5 + worse)], cov) == []
    assert _race([slow, fast], [_estimate(0.5), _estimate(0.5 + worse, False)], cov) == []
    # more regularized and gamma*alpha no larger: no faster for any curvature, and preferred
    # by the one-standard-error rule wherever j would be a candidate
    firm = GridPoint(0.2, 0.0004)       # gamma*alpha 8e-5 <= 1e-4
    assert _race([firm, slow], [_estimate(0.5), _estimate(0.5 + worse)], cov) == [slow.name]
    # a larger gamma*alpha is faster in the flat directions: no pruning
    strong = GridPoint(1.0, 0.0005)     # gamma*alpha 5e-4 > 1e-4
    assert _race([strong, slow], [_estimate(0.5), _estimate(0.5 + worse)], cov) == []
    # less regularized (slower too): the rule could still prefer j, so no pruning
    gentle = GridPoint(0.05, 0.0005)
    assert _race([gentle, slow], [_estimate(0.5), _estimate(0.5 + worse)], cov) == []


def test_a_rung_reached_late_by_a_large_chunk_is_skipped(monkeypatch, dominance):
    # the rung is taken at the end of the chunk reaching it; past half the rows after the rung
    # (chunks that are a large share of a small file) its scoring would cost more than it saves
    scored = []
    monkeypatch.setattr(tuning, "PRUNE_AT", (0.125,))
    race = _Race({}, _Held(10**5), period=10, block=100, n_train=10**6,
                 score=lambda n_val, alive, states: scored.append(n_val) or (None, None))
    assert race.rows == [125_000]
    assert race.prune(600_000, ["a"], {}) == [] and scored == []      # > 125k + 437.5k
    assert race.prune(500_000, ["a"], {}) == [] and scored == [race.validation_rows(500_000)]


def test_a_rung_scores_only_rows_held_before_it():
    # _Race.validation_rows(r): the validation rows of the groups of blocks before the one of
    # training row r; the training view has held at least those when it hands out row r
    from iwpfast.io.sources import open_source
    from iwpfast.io.views import HeldRows, PartSource
    n, period, block = 23_456, 10, 100
    table = _table(n)
    src = open_source(table)
    val = PartSource(src, period=period, block=block, validation=True)
    train = PartSource(src, period=period, block=block, validation=False)
    train.hold = HeldRows(val.num_rows, 1 << 30)
    race = _Race({}, train.hold, period, block, train.num_rows, score=None)
    row = 0
    for batch in train.batches(["a", "b", "c", "y"]):
        row += batch.num_rows
        held = race.validation_rows(row)
        assert held <= train.hold.filled
        # and the same rows as the validation part's first ones
        prefix = train.hold.prefix_source(["a"], held)
        first = pa.concat_tables([pa.Table.from_batches([b]) for b in val.batches(["a"])])
        np.testing.assert_array_equal(
            pa.concat_tables([pa.Table.from_batches([b]) for b in prefix.batches(["a"])])
            .column("a").to_numpy() if held else np.empty(0),
            first.column("a").to_numpy()[:held])
    # a rung late in the scan has most of the hold-out behind it
    assert race.validation_rows(train.num_rows) >= val.num_rows - period * block


def _private_task(n, seed=0, sigma=0.5, keep=0.85):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 3))
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-(X @ np.array([2.0, -1.5, 1.0])))), 1, 0)
    Xn = X + rng.normal(0, sigma, X.shape)
    yn = np.where(rng.random(n) < keep, y, 1 - y)
    return Xn, yn, dict(noise_var=sigma ** 2, label_keep_prob=keep, feature_bound=float(np.sqrt(3)))


def test_auto_prunes_and_chooses_the_full_grid_s_head_with_its_bits(monkeypatch, dominance, single_holdout):
    # 200,000 private rows, rungs from 500 validation rows: the scan stops the heads that a head
    # no faster beats clearly, and the model is the full grid's, bit for bit (survivors keep
    # their bits; the chosen head is a survivor)
    Xn, yn, noise = _private_task(200_000, sigma=0.3)
    monkeypatch.setattr(tuning, "PRUNE_MIN_ROWS", 500)
    monkeypatch.setattr(tuning, "PRUNE_AT", (0.125, 0.5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pruned = IWPClassifier(progress=False, chunk_rows=4096).fit(Xn, yn, **noise)
        again = IWPClassifier(progress=False, chunk_rows=4096).fit(Xn, yn, **noise)
        monkeypatch.setattr(tuning, "PRUNE_AT", ())
        full = IWPClassifier(progress=False, chunk_rows=4096).fit(Xn, yn, **noise)
    t, f = pruned.tuning_, full.tuning_
    stopped = [i for i, r in enumerate(t["pruned_at_row"]) if r is not None]
    assert stopped, "no head was pruned: the test data no longer exercise the race"
    assert all(r is None for r in f["pruned_at_row"])
    assert t["chosen"] == f["chosen"]
    np.testing.assert_array_equal(pruned.coef_, full.coef_)
    np.testing.assert_array_equal(pruned.intercept_, full.intercept_)
    for i in stopped:
        assert not t["chosen"][i] and not t["reliable"][i] and math.isnan(t["risk"][i])
        assert 0 < t["pruned_at_row"][i] < t["n_train"]
    for i in set(range(len(t["alpha"]))) - set(stopped):     # survivors: the same estimates
        # (nan for both: a head that diverged in both scans)
        assert t["risk"][i] == f["risk"][i] or math.isnan(t["risk"][i]) and math.isnan(f["risk"][i])
        assert t["stderr"][i] == f["stderr"][i]
    assert any("pruned early" in note for note in t["notes"])
    assert t["pruned_at_row"] == again.tuning_["pruned_at_row"]      # deterministic
    # the full grid agrees that each pruned head was not a candidate: its final risk is above
    # the chosen head's
    chosen = f["chosen"].index(True)
    assert all(f["risk"][i] > f["risk"][chosen] for i in stopped)


def test_no_pruning_on_small_data(monkeypatch):
    assert tuning.PRUNE_AT == (1 / 32, 1 / 16, 1 / 8, 1 / 4)                     # the defaults
    assert tuning.PRUNE_RULE == "halving" and tuning.HALVING_CREDIT == "none"
    monkeypatch.setattr(tuning, "PRUNE_AT", (0.125, 0.5))
    Xn, yn, noise = _private_task(20_000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = IWPClassifier(progress=False).fit(Xn, yn, **noise)
    # 2,000 validation rows in all: no rung has PRUNE_MIN_ROWS behind it
    assert all(r is None for r in m.tuning_["pruned_at_row"])


def test_k_classes_prune_within_a_class_and_keep_the_full_grid_s_models(monkeypatch, dominance,
                                                                        single_holdout):
    # 3 classes, one-vs-rest heads, rungs after 1/8 and 1/2: each class's heads race among
    # themselves (never across classes) and each class keeps a head.  With the conservative
    # credit the model is the full grid's, bit for bit.  With the default credit a class's choice
    # can differ: the full grid's pick (the most regularized head within one standard error of
    # the best) can be a faster head stopped at the 1/2 rung, behind by more than the credited
    # iterate noise but caught up by its tail average; the pruned scan then picks that class's
    # best head (on the grid of issue 20 class 1 did; on issue 33's grid none does)
    rng = np.random.default_rng(5)
    n = 120_000
    X = rng.uniform(-1, 1, (n, 3))
    y = np.argmax(X @ np.array([[2.0, -1.0, 0.0], [0.0, 1.5, -1.0], [-1.0, 0.0, 1.0]])
                  + rng.gumbel(size=(n, 3)), axis=1)
    Xn = X + rng.normal(0, 0.5, X.shape)
    noise = dict(noise_var=0.25, feature_bound=float(np.sqrt(3)))
    monkeypatch.setattr(tuning, "PRUNE_MIN_ROWS", 500)
    monkeypatch.setattr(tuning, "PRUNE_AT", (0.125, 0.5))       # the change happens at 1/2

    def fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return IWPClassifier(progress=False, chunk_rows=4096).fit(Xn, y, classes=[0, 1, 2],
                                                                      **noise)
    default = fit()
    monkeypatch.setattr(tuning, "PRUNE_CREDIT", "second_moment")
    conservative = fit()
    monkeypatch.setattr(tuning, "PRUNE_AT", ())
    full = fit()
    f = full.tuning_
    for model in (default, conservative):
        t = model.tuning_
        stopped = [i for i, r in enumerate(t["pruned_at_row"]) if r is not None]
        assert stopped, "no head was pruned: the test data no longer exercise the race"
        for c in (0, 1, 2):
            mine = [i for i, k in enumerate(t["class"]) if k == c]
            assert any(t["pruned_at_row"][i] is None for i in mine)
            assert not any(t["chosen"][i] for i in stopped)
            same = [t["chosen"][i] for i in mine] == [f["chosen"][i] for i in mine]
            if model is conservative or same:
                assert same
                np.testing.assert_array_equal(model.coef_[c], full.coef_[c])
                np.testing.assert_array_equal(model.intercept_[c], full.intercept_[c])
            else:
                chosen = next(i for i in mine if t["chosen"][i])
                assert f["risk"][chosen] == min(f["risk"][i] for i in mine if f["reliable"][i])


def test_the_cli_summary_counts_pruned_heads_and_the_updates_they_made(capsys):
    from iwpfast.commands.fit import print_tuning
    t = dict(alpha=[0.1, 0.1, 1.0, 1.0], learning_rate=[0.01, 0.02, 0.001, 0.002],
             risk=[0.5, math.nan, 0.52, math.nan], stderr=[0.01, math.inf, 0.01, math.inf],
             reliable=[True, False, True, False], noise_energy=[0.1, math.nan, 0.1, math.nan],
             capped=[False] * 4, pruned_at_row=[None, 1000, None, 3000],
             chosen=[False, False, True, False], heads=4, n_train=8000, n_validation=1000,
             rule="one standard error (paired)", passes=1.0, notes=[])
    print_tuning(t, table=True)
    out = capsys.readouterr().out
    # 8000 + 1000 + 8000 + 3000 updates over 8000 rows
    assert "2 reliable, 2 pruned early;" in out and "discarded" not in out
    assert "2.5 head updates per training row (4 without pruning)" in out
    assert out.count("pruned at row") == 2 and "pruned at row 3,000" in out
    del t["pruned_at_row"]                 # a model saved before pruning existed
    print_tuning(t)
    assert "4 head updates per training row" in capsys.readouterr().out


def test_select_does_not_count_pruned_heads_as_unreliable():
    from iwpfast.estimates import RiskEstimate
    from iwpfast.sgd.tuning import select
    points = [GridPoint(0.1, 0.01), GridPoint(0.1, 0.02), GridPoint(1.0, 0.01)]
    estimates = [_estimate(0.5), RiskEstimate(math.nan, math.inf, 0, reliable=False),
                 _estimate(0.6, reliable=False)]
    _, _, notes = select(points, estimates, n_pruned=1)
    assert notes == ["1 of 3 heads discarded: their private risk is unreliable"]
    _, _, notes = select(points, estimates)
    assert notes == ["2 of 3 heads discarded: their private risk is unreliable"]


# ---- issue 33's cost round: chunks that are views, rungs at their ends, siblings stop at once --
def test_a_raced_scan_reads_one_group_of_training_blocks_per_chunk():
    # (period - 1) x block rows: the training view's slice of one group, so a chunk is a view;
    # each rung at the chunk end nearest its share, later than the previous rung's, with
    # PRUNE_MIN_ROWS validation rows behind it
    race = _Race({}, _Held(10**7), period=10, block=8192, n_train=3_600_000, score=None)
    assert race.chunk_rows(10) == 73_728
    assert race.rows == [2 * 73_728, 3 * 73_728, 6 * 73_728, 12 * 73_728]
    assert all(race.validation_rows(r) >= tuning.PRUNE_MIN_ROWS for r in race.rows)
    # wide rows: the largest divisor of a group within the reader's bounds (8192 x 9 = 73,728)
    assert race.chunk_rows(200) == 8192
    # a group smaller than the reader's least chunk: whole groups; two rungs never merge
    small = _Race({}, _Held(10**7), period=10, block=500, n_train=900_000, score=None)
    assert small.chunk_rows(3) == 9000
    assert small.rows == sorted(set(small.rows)) and small.rows[0] >= 9000 * 2


def test_a_raced_scan_s_chunks_are_views_of_the_decoded_batches():
    from iwpfast.io.reader import ChunkReader
    from iwpfast.io.sources import open_source
    from iwpfast.io.views import HeldRows

    # a chunk is copied only where the end of a batch the source decoded cuts its group's
    # training blocks (the source's batches are the reader's multiple of chunks)
    table = _table(200_000)
    train, val = tuning.make_split(open_source(table), 0.1)
    train.hold = HeldRows(val.num_rows, 1 << 30)
    race = _Race({}, train.hold, train.period, train.block, train.num_rows, score=None)
    reader = ChunkReader(train, [["a", "b", "c"]], ["y"], race.chunk_rows(3))
    rows = sum(chunk.n_rows for chunk in reader)
    assert rows == train.num_rows and reader.stats.chunks == 20
    assert reader.stats.copied_chunks <= table.num_rows // reader.source_batch_rows()
    # the chunks of the power of two the race read before were nearly all copies
    before = ChunkReader(tuning.make_split(open_source(table), 0.1)[0], [["a", "b", "c"]], ["y"],
                         1 << 14)
    assert sum(chunk.n_rows for chunk in before) == rows
    assert before.stats.copied_chunks >= before.stats.chunks - 2 > 2 * reader.stats.copied_chunks


class _Siblings:
    """A race with no rung that names each head's siblings (k classes: its grid point's)."""

    rows: list = []

    @staticmethod
    def siblings(name):
        return [name[:-1] + c for c in "01"]


def test_the_siblings_of_a_diverged_head_stop_at_its_chunk():
    # one-vs-rest heads of two grid points, two classes; class 0's head of the large step
    # diverges: its class-1 sibling stops at the end of that chunk, not at the end of the pass
    rng = np.random.default_rng(3)
    n = 6000
    X = rng.uniform(-1, 1, (n, 3)) * 40.0
    y = (X[:, 0] > 0).astype(np.float64)       # class indices 0, 1
    table = pa.table({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "y": y})

    def head(name, lr, c):
        return Head(name, HeadConfig(loss="exponential", mode="clean", n_features=3,
                                     noise_var=np.zeros(3), batch_size=16, learning_rate=lr,
                                     radius=np.inf, label_class=c), ["a", "b", "c"], "y")
    heads = [head("big,c0", 50.0, 0), head("big,c1", 1e-6, 1), head("slow,c0", 1e-6, 0),
             head("slow,c1", 1e-6, 1)]
    kw = dict(progress=False, chunk_rows=1000, drop_diverged=True, head_threads=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = fit_stream(table, heads, **kw)
        raced = fit_stream(table, heads, race=_Siblings(), **kw)
    assert set(plain.diverged) == {"big,c0"}   # its sibling trained to the end
    assert raced.diverged["big,c1"] == raced.diverged["big,c0"] < n
    for name in ("slow,c0", "slow,c1"):        # the others keep their bits
        np.testing.assert_array_equal(raced.states[name].theta, plain.states[name].theta)
