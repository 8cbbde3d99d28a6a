"""Issue 20: the 'auto' grid's hopeless heads stopped early on the interleaved hold-out.

The driver's ``race`` hook (heads stopped mid-scan: the others keep their bits, the stopped ones
are the models at that row), the rows a rung of ``iwpfast.sgd.halving.Race`` scores (held
before the scan reaches it, whatever the reader's timing), and the estimator: survivors keep
their bits, pruned heads are never chosen, reported in ``tuning_`` (successive halving's own rule:
tests/test_tuning_grid.py; issue 20's "dominance" rule, which only these tests ran, is gone).
"""
import math
import warnings

import numpy as np
import pyarrow as pa
import pytest

from iwpfast import IWPClassifier
from iwpfast.exceptions import InvalidInputError
from iwpfast.settings import SearchOptions
from iwpfast.sgd.driver import Head, fit_stream
from iwpfast.sgd.grid import GridPoint
from iwpfast.sgd.halving import Race
from iwpfast.sgd.split import make_split
from iwpfast.sgd.state import HeadConfig

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


class _Held:
    def __init__(self, n_rows):
        self.n_rows = n_rows


def _estimate(risk, reliable=True):
    from iwpfast.estimates import RiskEstimate
    return RiskEstimate(risk, 0.01, 1000, reliable=reliable)


def test_a_rung_reached_late_by_a_large_chunk_is_skipped():
    # the rung is taken at the end of the chunk reaching it; past half the rows after the rung
    # (chunks that are a large share of a small file) its scoring would cost more than it saves
    scored = []
    race = Race({}, _Held(10**5), period=10, block=100, n_train=10**6,
                 score=lambda n_val, alive, states: scored.append(n_val) or (None, None),
                 options=SearchOptions(prune_at=(0.125,), halving_min=0))
    assert race.rows == [125_000]
    assert race.prune(600_000, ["a"], {}) == [] and scored == []      # > 125k + 437.5k
    assert race.prune(500_000, ["a"], {}) == [] and scored == [race.validation_rows(500_000)]


def test_a_rung_scores_only_rows_held_before_it():
    # Race.validation_rows(r): the validation rows of the groups of blocks before the one of
    # training row r; the training view has held at least those when it hands out row r
    from iwpfast.io.sources import open_source
    from iwpfast.io.views import HeldRows, PartSource
    n, period, block = 23_456, 10, 100
    table = _table(n)
    src = open_source(table)
    val = PartSource(src, period=period, block=block, validation=True)
    train = PartSource(src, period=period, block=block, validation=False)
    train.hold = HeldRows(val.num_rows, 1 << 30)
    race = Race({}, train.hold, period, block, train.num_rows, score=None)
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


def test_auto_prunes_and_the_survivors_keep_their_bits(monkeypatch, single_holdout):
    # 200,000 private rows, rungs from 500 validation rows: the scan halves the grid twice; the
    # survivors keep the full grid's bits and estimates, a stopped head is never chosen, and the
    # choice is one the full grid's hold-out cannot tell from its best (with issue 20's
    # "dominance" rule the model was the full grid's bit for bit; halving stops more heads)
    Xn, yn, noise = _private_task(200_000, sigma=0.3)
    monkeypatch.setenv("IWPFAST_PRUNE_MIN_ROWS", "500")
    monkeypatch.setenv("IWPFAST_PRUNE_AT", "0.125,0.5")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pruned = IWPClassifier(progress=False, chunk_rows=4096, solver="sgd").fit(Xn, yn, **noise)
        again = IWPClassifier(progress=False, chunk_rows=4096, solver="sgd").fit(Xn, yn, **noise)
        monkeypatch.setenv("IWPFAST_PRUNE_AT", "")
        full = IWPClassifier(progress=False, chunk_rows=4096, solver="sgd").fit(Xn, yn, **noise)
    t, f = pruned.tuning_, full.tuning_
    stopped = [i for i, r in enumerate(t["pruned_at_row"]) if r is not None]
    assert stopped, "no head was pruned: the test data no longer exercise the race"
    assert all(r is None for r in f["pruned_at_row"])
    for i in stopped:
        assert not t["chosen"][i] and not t["reliable"][i] and math.isnan(t["risk"][i])
        assert 0 < t["pruned_at_row"][i] < t["n_train"]
    for i in set(range(len(t["alpha"]))) - set(stopped):     # survivors: the same estimates
        # (nan for both: a head that diverged in both scans)
        assert t["risk"][i] == f["risk"][i] or math.isnan(t["risk"][i]) and math.isnan(f["risk"][i])
        assert t["stderr"][i] == f["stderr"][i]
    assert any("pruned early" in note for note in t["notes"])
    assert t["pruned_at_row"] == again.tuning_["pruned_at_row"]      # deterministic
    chosen = t["chosen"].index(True)
    best = min((i for i in range(len(f["alpha"])) if f["reliable"][i]), key=lambda i: f["risk"][i])
    assert f["risk"][chosen] - f["risk"][best] <= f["stderr"][best]
    if t["chosen"] == f["chosen"]:
        np.testing.assert_array_equal(pruned.coef_, full.coef_)
        np.testing.assert_array_equal(pruned.intercept_, full.intercept_)


def test_no_pruning_on_small_data(monkeypatch):
    assert SearchOptions().prune_at == (1 / 32, 1 / 16, 1 / 8, 1 / 4)             # the defaults
    assert SearchOptions().prune_min_rows == 8192
    monkeypatch.setenv("IWPFAST_PRUNE_AT", "0.125,0.5")
    Xn, yn, noise = _private_task(20_000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = IWPClassifier(progress=False, solver="sgd").fit(Xn, yn, **noise)
    # 2,000 validation rows in all: no rung has prune_min_rows behind it
    assert all(r is None for r in m.tuning_["pruned_at_row"])


def test_k_classes_prune_within_a_class_and_keep_the_full_grid_s_models(monkeypatch,
                                                                        single_holdout):
    # 3 classes, one-vs-rest heads, rungs after 1/8 and 1/2: each class's heads race among
    # themselves (never across classes) and each class keeps a head.  A class whose choice is
    # the full grid's has its model bit for bit; one whose full-grid pick was stopped chooses a
    # survivor the hold-out cannot tell from the full grid's best
    rng = np.random.default_rng(5)
    n = 120_000
    X = rng.uniform(-1, 1, (n, 3))
    y = np.argmax(X @ np.array([[2.0, -1.0, 0.0], [0.0, 1.5, -1.0], [-1.0, 0.0, 1.0]])
                  + rng.gumbel(size=(n, 3)), axis=1)
    Xn = X + rng.normal(0, 0.5, X.shape)
    noise = dict(noise_var=0.25, feature_bound=float(np.sqrt(3)))
    monkeypatch.setenv("IWPFAST_PRUNE_MIN_ROWS", "500")
    monkeypatch.setenv("IWPFAST_PRUNE_AT", "0.125,0.5")

    def fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return IWPClassifier(progress=False, chunk_rows=4096, solver="sgd").fit(Xn, y, classes=[0, 1, 2],
                                                                      **noise)
    model = fit()
    monkeypatch.setenv("IWPFAST_PRUNE_AT", "")
    full = fit()
    t, f = model.tuning_, full.tuning_
    stopped = [i for i, r in enumerate(t["pruned_at_row"]) if r is not None]
    assert stopped, "no head was pruned: the test data no longer exercise the race"
    for c in (0, 1, 2):
        mine = [i for i, k in enumerate(t["class"]) if k == c]
        assert any(t["pruned_at_row"][i] is None for i in mine)
        assert not any(t["chosen"][i] for i in stopped)
        if [t["chosen"][i] for i in mine] == [f["chosen"][i] for i in mine]:
            np.testing.assert_array_equal(model.coef_[c], full.coef_[c])
            np.testing.assert_array_equal(model.intercept_[c], full.intercept_[c])
        else:
            chosen = next(i for i in mine if t["chosen"][i])
            best = min((i for i in mine if f["reliable"][i]), key=lambda i: f["risk"][i])
            assert f["risk"][chosen] - f["risk"][best] <= f["stderr"][best]


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
    from iwpfast.sgd.choice import select
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
    # prune_min_rows validation rows behind it
    race = Race({}, _Held(10**7), period=10, block=8192, n_train=3_600_000, score=None)
    assert race.chunk_rows(10) == 73_728
    assert race.rows == [2 * 73_728, 3 * 73_728, 6 * 73_728, 12 * 73_728]
    assert all(race.validation_rows(r) >= SearchOptions().prune_min_rows for r in race.rows)
    # wide rows: the largest divisor of a group within the reader's bounds (8192 x 9 = 73,728)
    assert race.chunk_rows(200) == 8192
    # a group smaller than the reader's least chunk: whole groups; two rungs never merge
    small = Race({}, _Held(10**7), period=10, block=500, n_train=900_000, score=None)
    assert small.chunk_rows(3) == 9000
    assert small.rows == sorted(set(small.rows)) and small.rows[0] >= 9000 * 2


def test_a_raced_scan_s_chunks_are_views_of_the_decoded_batches():
    from iwpfast.io.reader import ChunkReader
    from iwpfast.io.sources import open_source
    from iwpfast.io.views import HeldRows

    # a chunk is copied only where the end of a batch the source decoded cuts its group's
    # training blocks (the source's batches are the reader's multiple of chunks)
    table = _table(200_000)
    train, val = make_split(open_source(table), 0.1)
    train.hold = HeldRows(val.num_rows, 1 << 30)
    race = Race({}, train.hold, train.period, train.block, train.num_rows, score=None)
    reader = ChunkReader(train, [["a", "b", "c"]], ["y"], race.chunk_rows(3))
    rows = sum(chunk.n_rows for chunk in reader)
    assert rows == train.num_rows and reader.stats.chunks == 20
    assert reader.stats.copied_chunks <= table.num_rows // reader.source_batch_rows()
    # the chunks of the power of two the race read before were nearly all copies
    before = ChunkReader(make_split(open_source(table), 0.1)[0], [["a", "b", "c"]], ["y"],
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
