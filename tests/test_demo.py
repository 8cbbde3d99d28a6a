"""`iwpfast demo` in a reduced size: the table shows naive further from the clean optimum than IWP."""
import io
import warnings

import numpy as np
import pytest

pytestmark = pytest.mark.kernels


def test_demo_reduced_size_shows_the_bias_of_naive(tmp_path):
    """20,000 rows at (5, 1e-5)-LDP are too few for IWP to resolve theta* (its error there is
    larger than naive's bias), so the reduced run uses epsilon = 20 (sigma = 3.2).  Margin: over
    seeds 0..11 of this configuration |theta_naive - theta*| / |theta_iwp - theta*| was 1.39 at
    worst and 2.9 on average (naive minus IWP distance: 0.026 +- 0.013, min 0.006); seed 0 gives
    2.4, and we assert 1.3."""
    from iwpfast.demo import run_demo

    out = io.StringIO()
    with warnings.catch_warnings():
        # the main job warns about nothing: its labels are declared (-1/+1), not read from the data
        warnings.simplefilter("error")
        res = run_demo(rows=20_000, epsilon=20.0, seed=0, out_dir=tmp_path, progress=False,
                       stream=out)
    table = out.getvalue()
    for row in ("clean optimum theta*", "SGD on clean data", "(naive)", "IWP-SGD on private data",
                "rows/s"):
        assert row in table
    naive, iwp, clean = (res.heads[h].distance for h in ("naive", "iwp", "clean"))
    assert naive > 1.3 * iwp, table
    assert clean < iwp  # clean SGD is the reference: nearest of the three
    assert res.heads["iwp"].test_risk < res.heads["naive"].test_risk
    if res.plot_path is not None:  # matplotlib installed
        with open(res.plot_path, "rb") as fh:
            assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    assert np.isfinite(res.rows_per_s) and res.rows_per_s > 0


def test_demo_cli_runs_without_a_plot(tmp_path, capsys):
    from iwpfast.cli import main

    assert main(["demo", "--rows", "5000", "--features", "4", "--epsilon", "20", "--no-plot",
                 "--no-progress", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "IWP-SGD on private data" in out and "plot:" not in out
    assert main(["demo", "--loss", "hinge", "--no-plot"]) == 2
    assert "unknown loss 'hinge'" in capsys.readouterr().err


@pytest.mark.slow
def test_real_demo_naive_collapses_and_iwp_lands_near_theta_star(tmp_path):
    """The ACS demo at its defaults ((10, 1e-5)-LDP, lambda = 0.5, intercept, all 224,909 rows).
    Margins: over seeds 0..7 |theta_iwp - theta*| / |theta*| was 0.07..0.24 and naive's 0.95 (it
    collapses to theta ~ 0 and predicts the majority class, accuracy ~0.51 against 0.645 at theta*);
    we assert 0.35 and 0.8 on seed 0 (0.16 and 0.95 there)."""
    from iwpfast.demo import run_demo

    out = io.StringIO()
    res = run_demo(real=True, seed=0, progress=False, plot=False, stream=out)
    table = out.getvalue()
    assert "(10, 1e-05)-LDP" in table and "lambda = 0.5, noise-free intercept" in table
    assert res.rows == 224_909 and res.fit_intercept
    norm = float(np.linalg.norm(res.theta_star))
    assert 0.2 < norm < 0.35, table          # a model worth learning, not theta* ~ 0
    assert res.optimum_accuracy > 0.62, table
    assert res.heads["iwp"].distance < 0.35 * norm, table
    assert res.heads["naive"].distance > 0.8 * norm, table
    assert res.heads["iwp"].accuracy > res.heads["naive"].accuracy + 0.05, table


def test_synthetic_demo_table_keeps_its_settings_line(tmp_path):
    """The default demo's table is quoted in the README: no intercept, no lambda in its header."""
    from iwpfast.demo import run_demo

    out = io.StringIO()
    res = run_demo(rows=5_000, features=4, epsilon=20.0, seed=0, progress=False, plot=False, stream=out)
    assert not res.fit_intercept and res.alpha == 5.0
    assert res.heads["iwp"].intercept == 0.0
    assert "intercept" not in out.getvalue() and "b* =" not in out.getvalue()
