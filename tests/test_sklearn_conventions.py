"""scikit-learn conventions the estimators follow (a subset of check_estimator; the full check is
not passed yet, see docs/usage.md): predict_proba only for a probabilistic loss, clear refusals."""
import numpy as np
import pytest

from iwpfast import IWPClassifier, IWPRegressor
from iwpfast.exceptions import InvalidInputError


def _xy(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    return X, (X[:, 0] > 0).astype(int)


def _clf(**kw):
    return IWPClassifier(alpha=1.0, learning_rate=0.01, progress=False, **kw)


def test_predict_proba_exists_only_for_the_logistic_and_exponential_losses():
    X, y = _xy()
    assert not hasattr(_clf(loss="quadratic").fit(X, y), "predict_proba")
    assert hasattr(_clf(loss="exponential").fit(X, y), "predict_proba")
    with pytest.raises(InvalidInputError, match="loss='logistic'"):
        _clf(loss="quadratic").fit(X, y).predict_proba(X)
    proba = _clf(loss="logistic").fit(X, y).predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_refusals_name_the_problem_as_scikit_learn_expects():
    X, y = _xy()
    model = _clf().fit(X, y)
    with pytest.raises(InvalidInputError, match="X has 2 features, but IWPClassifier is expecting 3"):
        model.predict(X[:, :2])
    with pytest.raises(InvalidInputError, match="Reshape your data"):
        model.predict(X[0])
    with pytest.raises(InvalidInputError, match="requires y to be passed, but the target y is None"):
        _clf().fit(X)
    with pytest.raises(InvalidInputError, match="Complex data not supported"):
        _clf().fit(X + 1j, y)
    with pytest.raises(InvalidInputError, match=r"0 feature\(s\) \(shape=\(400, 0\)\)"):
        _clf().fit(X[:, :0], y)
    with pytest.raises(InvalidInputError, match="Unknown label type: continuous"):
        _clf().fit(X, X[:, 1])
    sparse = pytest.importorskip("scipy.sparse")
    with pytest.raises(InvalidInputError, match="sparse input is not supported"):
        _clf().fit(sparse.csr_matrix(X), y)
    # object arrays of numbers are numbers
    np.testing.assert_array_equal(_clf().fit(X.astype(object), y).coef_, _clf().fit(X, y).coef_)


@pytest.mark.parametrize("row", [5, 399])            # a full batch, and the last partial batch
def test_nan_in_fit_is_an_input_error_naming_the_column(row):
    X, y = _xy()
    X[row, 1] = np.nan
    with pytest.raises(InvalidInputError, match=r"non-finite value nan in column 'x1'"):
        _clf(batch_size=128).fit(X, y)
    with pytest.raises(InvalidInputError, match=r"non-finite value nan in column 'x1'"):
        IWPRegressor(alpha=1.0, learning_rate=0.01, progress=False).fit(X, X[:, 0])
