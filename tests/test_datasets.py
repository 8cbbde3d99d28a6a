import numpy as np
import pytest

from iwpfast.datasets import ACS_FEATURES, ACS_TARGET_RANGES, load_acs, make_classification, scale_to_unit
from iwpfast.exceptions import InvalidInputError


@pytest.mark.parametrize("p", [2, 10])
def test_make_classification_shape_range_labels(p):
    X, y = make_classification(5000, n_features=p, random_state=1)
    assert X.shape == (5000, p) and y.shape == (5000,)
    assert X.dtype == np.float64 and X.flags.c_contiguous
    np.testing.assert_allclose(X.min(axis=0), -1.0)
    np.testing.assert_allclose(X.max(axis=0), 1.0)
    assert set(np.unique(y).tolist()) == {-1.0, 1.0}
    # equal class weights, 1% of labels redrawn: the positive share is 0.5 up to rounding
    assert abs(np.mean(y == 1) - 0.5) < 0.01


def test_make_classification_is_reproducible_and_seed_dependent():
    a = make_classification(300, n_features=3, random_state=7)
    b = make_classification(300, n_features=3, random_state=7)
    c = make_classification(300, n_features=3, random_state=8)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])


def test_cluster_structure_without_shuffle():
    # Unshuffled: 4 clusters of n/4 rows in order, labels alternating 0,1,0,1 by cluster.
    n = 4000
    X, y = make_classification(n, n_features=2, flip_y=0.0, shuffle=False, scale=False,
                               random_state=3)
    blocks = y.reshape(4, n // 4)
    assert np.all(blocks[0] == -1) and np.all(blocks[1] == 1)
    assert np.all(blocks[2] == -1) and np.all(blocks[3] == 1)
    # Cluster centres are distinct hypercube vertices: their means are pairwise far apart compared
    # to the standard error of a mean of 1000 rows (sd of a coordinate is at most ~ 2 * 101 here).
    means = X.reshape(4, n // 4, 2).mean(axis=1)
    d = np.linalg.norm(means[:, None] - means[None], axis=-1)
    assert np.all(d[~np.eye(4, dtype=bool)] > 0)


def test_flip_y_changes_the_expected_share_of_labels():
    # flip_y = 1 redraws every label uniformly: labels become independent of the cluster.
    n = 20000
    X, y = make_classification(n, n_features=2, flip_y=1.0, shuffle=False, random_state=0)
    first_cluster = y[: n // 4]
    # share of +1 in a cluster of 5000 uniform draws: sd 0.0071; 5 sd margin
    assert abs(np.mean(first_cluster == 1) - 0.5) < 0.036


def test_noise_features_are_uninformative():
    X, y = make_classification(20000, n_features=10, random_state=2)
    corr = np.abs([np.corrcoef(X[:, j], y)[0, 1] for j in range(10)])
    # 8 noise columns have |corr| ~ |N(0, 1/n)|: sd 0.007, so 5 sd = 0.035.  The informative pair may
    # be uncorrelated with y too: with 2 clusters per class on the 4 vertices of a square, a class
    # sits on a diagonal in 1 draw of 3 (XOR) -- as in scikit-learn.
    assert np.sort(corr)[:8].max() < 0.035
    # ... but the labels are predictable from the informative pair with quadratic features, which
    # also solve the XOR layout; noise alone would give accuracy 0.5 +- 0.004.
    Z = np.column_stack([np.ones(len(y)), X, (X[:, :, None] * X[:, None, :]).reshape(len(y), -1)])
    w = np.linalg.lstsq(Z, y, rcond=None)[0]
    assert np.mean(np.sign(Z @ w) == y) > 0.6


def test_matches_sklearn_distribution():
    # Same algorithm, different random stream: compare a statistic's mean over seeds.  The statistic
    # is the training accuracy of the least-squares classifier, which depends on the random
    # cluster covariances; the threshold is 4 standard errors of the difference of the two means.
    sk = pytest.importorskip("sklearn.datasets")

    def stat(X, y):
        w = np.linalg.lstsq(np.column_stack([X, np.ones(len(y))]), y, rcond=None)[0]
        return np.mean(np.sign(np.column_stack([X, np.ones(len(y))]) @ w) == y)

    ours, theirs = [], []
    for seed in range(30):
        X, y = make_classification(2000, n_features=2, random_state=seed)
        ours.append(stat(X, y))
        Xs, ys = sk.make_classification(2000, n_features=2, n_informative=2, n_redundant=0,
                                        random_state=seed)
        theirs.append(stat(Xs, 2.0 * ys - 1))
    ours, theirs = np.array(ours), np.array(theirs)
    se = np.sqrt(ours.var(ddof=1) / 30 + theirs.var(ddof=1) / 30)
    assert abs(ours.mean() - theirs.mean()) < 4 * se


def test_make_classification_rejects_bad_parameters():
    with pytest.raises(InvalidInputError, match="n_redundant"):
        make_classification(100, n_features=2, n_informative=2, n_redundant=1)
    with pytest.raises(InvalidInputError, match="n_clusters_per_class"):
        make_classification(100, n_features=2, n_informative=1)
    with pytest.raises(InvalidInputError, match="flip_y"):
        make_classification(100, flip_y=1.5)


@pytest.mark.parametrize("task,n", [("income", 281136), ("pubcov", 156934)])
def test_load_acs(task, n):
    data = load_acs(task)
    assert data.features == ACS_FEATURES[task]
    assert data.X.shape == (n, 4) and data.y.shape == (n,) and data.income.shape == (n,)
    assert set(np.unique(data.y).tolist()) == {-1.0, 1.0}
    r = data.ranges_array
    # the shipped rows lie inside the declared ranges (otherwise scaling would clip real values)
    assert np.all(data.X >= r[:, 0]) and np.all(data.X <= r[:, 1])
    Xs = scale_to_unit(data.X, r)
    assert Xs.min() >= -1.0 and Xs.max() <= 1.0
    # SEX (1/2) maps exactly onto {-1, 1}
    assert set(np.unique(Xs[:, 1]).tolist()) == {-1.0, 1.0}


def test_acs_income_label_is_income_threshold():
    data = load_acs("income")
    np.testing.assert_array_equal(data.y == 1, data.income > 50000)
    assert ACS_TARGET_RANGES["income"][0] == "PINCP"


def test_scale_to_unit_clips_and_maps():
    X = np.array([[0.0, 5.0], [10.0, -5.0], [20.0, 0.0]])
    out = scale_to_unit(X, [[0, 10], [-5, 5]])
    np.testing.assert_allclose(out, [[-1, 1], [1, -1], [1, 0]])
    np.testing.assert_allclose(scale_to_unit(np.array([0.0, 5.0]), (0, 10)), [-1, 0])
    with pytest.raises(InvalidInputError, match="column 1"):
        scale_to_unit(X, [[0, 10], [5, 5]])
    with pytest.raises(InvalidInputError, match="2 columns"):
        scale_to_unit(X, [[0, 10]])


def test_load_acs_unknown_task():
    with pytest.raises(InvalidInputError, match="income"):
        load_acs("adult")


def test_structure_seed_fixes_the_distribution():
    # Same structure seed, different sample seeds: each feature's correlation with the label agrees
    # (affine-invariant, so the data-dependent min-max scaling does not matter; the sd of a sample
    # correlation is < 1/sqrt(n) = 0.007, so 0.04 is > 4 sd of the difference); another structure
    # seed moves them.
    def corr(X, y):
        return np.array([np.corrcoef(X[:, j], y)[0, 1] for j in range(X.shape[1])])

    kw = dict(n_features=3, structure_random_state=11)
    X1, y1 = make_classification(20000, random_state=1, **kw)
    X2, y2 = make_classification(20000, random_state=2, **kw)
    X3, y3 = make_classification(20000, n_features=3, random_state=1, structure_random_state=12)
    assert np.abs(corr(X1, y1) - corr(X2, y2)).max() < 0.04
    assert np.abs(corr(X1, y1) - corr(X3, y3)).max() > 0.1
    assert not np.array_equal(X1, X2)
