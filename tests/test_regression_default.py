"""The regressor's default solver (issue 46 item 2): 'auto' is the moment learner where it applies
(the squared error's exact minimizer from the release's debiased moments), SGD where an SGD-only
setting, sample weights or a checkpoint ask for it; the classifier's 'auto' stays SGD."""
import json
import warnings

import numpy as np
import pytest

import iwpfast
from iwpfast import IWPClassifier, IWPRegressor
from iwpfast.cli import main
from iwpfast.exceptions import InvalidInputError
from iwpfast.privacy import ReleaseSpec, release


def _data(n=20000, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 3))
    y = X @ np.array([0.5, -0.3, 0.2]) + rng.normal(0, 0.2, n)
    return X, y


CLEAN = dict(noise_var=0.0, target_noise_var=0.0)


def test_the_default_regressor_is_the_moment_learner_and_equals_explicit_moments():
    X, y = _data()
    auto = IWPRegressor(progress=False).fit(X, y, **CLEAN)
    explicit = IWPRegressor(progress=False, solver="moments").fit(X, y, **CLEAN)
    assert auto.solver_ == "moments"
    np.testing.assert_array_equal(auto.coef_, explicit.coef_)
    assert auto.intercept_ == explicit.intercept_
    # clean least squares: the moments solve its normal equations (alpha chosen ~ 0 here)
    A = np.column_stack([X, np.ones(len(y))])
    ols = np.linalg.lstsq(A, y, rcond=None)[0]
    np.testing.assert_allclose(auto.coef_, ols[:3], atol=5e-3)


@pytest.mark.parametrize("setting", [dict(learning_rate=0.01), dict(schedule="inverse"),
                                     dict(variance_cap=2.0), dict(radius=5.0), dict(mu=0.1),
                                     dict(average=False), dict(correction="none")])
def test_an_sgd_only_setting_makes_auto_sgd(setting):
    X, y = _data(4000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = IWPRegressor(progress=False, **setting).fit(X, y, **CLEAN)
    assert m.solver_ == "sgd"


def test_sample_weight_and_checkpoint_make_auto_sgd_where_moments_refuse(tmp_path):
    X, y = _data(4000)
    w = np.ones(len(y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert IWPRegressor(progress=False).fit(X, y, sample_weight=w, **CLEAN).solver_ == "sgd"
        with pytest.raises(InvalidInputError, match="sample_weight is not implemented"):
            IWPRegressor(progress=False, solver="moments").fit(X, y, sample_weight=w, **CLEAN)
        m = IWPRegressor(progress=False, alpha=1e-3, learning_rate=0.05).fit(
            X, y, checkpoint=tmp_path / "ck.json", **CLEAN)
    assert m.solver_ == "sgd"


def test_the_classifier_auto_stays_sgd():
    X, y = _data(4000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = IWPClassifier(progress=False, solver="auto").fit(X, np.where(y > 0, 1, -1),
                                                             noise_var=0.0, label_keep_prob=1.0)
    assert c.solver_ == "sgd"


def test_partial_fit_auto_starts_sgd_and_continues_a_fits_moments():
    X, y = _data(8000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stream = IWPRegressor(progress=False).partial_fit(X[:4000], y[:4000], **CLEAN)
    assert stream.solver_ == "sgd"
    m = IWPRegressor(progress=False).fit(X[:4000], y[:4000], **CLEAN)
    m.partial_fit(X[4000:], y[4000:], **CLEAN)
    assert m.solver_ == "moments" and m.n_rows_seen_ == 8000


def test_too_few_rows_for_the_folds_fall_back_to_sgd():
    X, y = _data(6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert IWPRegressor(progress=False).fit(X, y, **CLEAN).solver_ == "sgd"
    with pytest.raises(InvalidInputError, match="fill only one"):
        IWPRegressor(progress=False, solver="moments").fit(X[:1], y[:1], **CLEAN)


def test_a_small_table_deals_every_fold_rows():
    from iwpfast.moment_stats import fold_block_rows
    assert fold_block_rows(15, 5) == 1
    assert fold_block_rows(442, 5) == 16            # 442 // 20 = 22 -> 16: 4+ blocks a part
    assert fold_block_rows(5119, 5) == 128
    assert fold_block_rows(5120, 5) == 1024         # from here 1,024-row blocks


def _regression_release(tmp_path, n=20000):
    X, y = _data(n, seed=8)
    spec = ReleaseSpec(epsilon_x=4.0, delta=1e-5, bound=1.0, epsilon_y=2.0, task="regression",
                       features=["a", "b", "c"], label="y", target_range=(-2, 2),
                       ranges={k: (-1, 1) for k in "abc"})
    out = tmp_path / "reg.parquet"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "y": y}, out, spec, seed=4)
    return out


def test_cli_regression_default_is_moments_and_the_model_file_says_so(tmp_path, capsys):
    out = _regression_release(tmp_path)
    model = tmp_path / "m.json"
    assert main(["fit", str(out), "--out", str(model), "--no-progress"]) == 0
    said = capsys.readouterr().out
    assert "solver: moments" in said
    doc = json.loads(model.read_text())
    assert doc["fitted"]["solver"] == "moments" and doc["format_version"] == 2
    back = iwpfast.load(model)
    assert back.solver_ == "moments" and back.solver == "auto"
    # --learning-rate asks for SGD
    sgd = tmp_path / "s.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["fit", str(out), "--out", str(sgd), "--no-progress", "--alpha", "0.001",
                     "--learning-rate", "0.05"]) == 0
    assert "solver" not in json.loads(sgd.read_text())["fitted"]


def test_coef_stderr_is_the_delete_one_group_jackknife_over_20_groups():
    from iwpfast.moment_stats import fold_block_rows
    X, y = _data(30_000, seed=5)
    m = IWPRegressor(progress=False, alpha=0.0).fit(X, y, **CLEAN)
    block = fold_block_rows(len(y), 5)
    group = np.arange(len(y)) // block % 20
    Z = np.column_stack([X, np.ones(len(y))])
    thetas = np.array([np.linalg.lstsq(Z[group != g], y[group != g], rcond=None)[0]
                       for g in range(20)])
    se = np.sqrt(19 / 20 * ((thetas - thetas.mean(axis=0)) ** 2).sum(axis=0))
    np.testing.assert_allclose(m.coef_stderr_, se[:3], rtol=1e-6)
    assert m.intercept_stderr_ == pytest.approx(se[3], rel=1e-6)
    # the folds that choose alpha are unchanged: 5 of them
    assert IWPRegressor(progress=False).fit(X, y, **CLEAN).tuning_["folds"] == 5
