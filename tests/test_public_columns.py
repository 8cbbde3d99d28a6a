"""Issue 18: public columns and label-only releases -- the learner's side (per-column noise with
zeros) and the release's (public columns scaled and clipped, never noised)."""
import numpy as np
import pytest

from iwpfast.estimates import iwp_gradient
from iwpfast.losses import LOSS_RECORDS


@pytest.mark.parametrize("loss", ["exponential", "quadratic"])
def test_iwp_gradient_is_unbiased_with_zeros_in_the_per_column_variances(loss):
    """Monte Carlo over the release noise (fixed seed, 400,000 draws per row): the mean IWP
    gradient of each row equals the clean gradient f'(y u) y x (and f'(y u) y for the
    intercept) within 4 standard errors of the mean (SE = sample sd / sqrt(draws)); the noise
    variances are s = (0.5, 0, 0.8, 0): columns 1 and 3 public, never noised, labels by
    randomized response at epsilon_y = 1."""
    rng = np.random.default_rng(11)
    s = np.array([0.5, 0.0, 0.8, 0.0])
    theta = np.array([0.4, -0.7, 0.3, 0.5])
    b = 0.2
    keep = 1 / (1 + np.exp(-1.0))
    draws = 400_000
    for x, y in ((np.array([0.5, -0.2, 0.1, 0.9]), 1.0), (np.array([-0.3, 0.6, -0.8, 0.1]), -1.0)):
        X = x + rng.standard_normal((draws, 4)) * np.sqrt(s)
        assert np.all(X[:, [1, 3]] == x[[1, 3]])           # public columns carry no noise
        yt = np.where(rng.random(draws) < keep, y, -y)
        g = iwp_gradient(theta, X, yt, loss=loss, noise_var=s, epsilon_y=1.0, intercept=b)
        fp = LOSS_RECORDS[loss].derivative(1, np.array([y * (theta @ x + b)]))[0]
        clean = np.append(fp * y * x, fp * y)
        se = g.std(axis=0, ddof=1) / np.sqrt(draws)
        assert np.all(np.abs(g.mean(axis=0) - clean) < 4 * se + 1e-12), (g.mean(axis=0), clean, se)


def test_the_grid_reads_per_column_noise():
    """'auto''s derived step: the feature factor sums the private variances only, the cap bounds
    |theta| only when every column is noised, and a label-only release (no feature noise) is
    bounded by the projection radius, the label factor and the smoothness."""
    from iwpfast.sgd import tuning
    kw = dict(loss="exponential", alpha=0.1, n_updates=1000, bound=2.0, batch_size=128,
              label_keep_prob=0.73, n_features=5, radius=3.0)
    uniform = tuning.derived_step(noise_var=1.5, **kw)
    assert tuning.derived_step(noise_var=[1.5] * 5, **kw) == uniform
    # two public columns: less noise, a larger (or equal) step
    mixed = tuning.derived_step(noise_var=[1.5, 1.5, 1.5, 0.0, 0.0], **kw)
    assert mixed >= uniform
    noise = tuning.column_noise([1.5, 1.5, 1.5, 0.0, 0.0], 5)
    assert noise.total == 4.5 and not noise.all_private
    assert noise.capped_radius(10.0, 2.0) == 10.0         # the public directions are not capped
    assert tuning.column_noise(2.0, 3).capped_radius(10.0, 2.0) == 1.0
    label_only = tuning.derived_step(noise_var=[0.0] * 5, **kw)
    no_label_noise = tuning.derived_step(noise_var=[0.0] * 5, **dict(kw, label_keep_prob=None))
    assert label_only <= no_label_noise and label_only >= mixed
