"""Accuracy and balanced accuracy with and without class_weight='balanced' on the shipped ACS
public-coverage data (34% positives): a label-only release (features public, scaled by the
declared ranges; labels by randomized response, eps_y = 1) and a clean fit, against
scikit-learn's LogisticRegression (clean labels, with and without class_weight='balanced').

    python bench/class_weight_acs.py [--seed 0]

80/20 split of the 156,934 rows (fixed seed); the test labels are clean.  Prints one table row
per (release, class_weight).
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

from iwpfast import IWPClassifier
from iwpfast.datasets import load_acs, scale_to_unit


def balanced_accuracy(pred, y):
    return 0.5 * (np.mean(pred[y > 0] > 0) + np.mean(pred[y < 0] < 0))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    data = load_acs("pubcov")
    X = scale_to_unit(data.X, data.ranges_array)
    y = data.y
    rng = np.random.default_rng(args.seed)
    order = rng.permutation(y.size)
    cut = int(0.8 * y.size)
    train, test = order[:cut], order[cut:]
    keep = 1 / (1 + math.exp(-1.0))
    released = np.where(rng.random(cut) < keep, y[train], -y[train])
    print(f"rows {y.size:,} (train {cut:,}), positives {np.mean(y > 0):.3f}, "
          f"test majority {max(np.mean(y[test] > 0), np.mean(y[test] < 0)):.4f}")
    print("| fit | class_weight | accuracy | balanced accuracy | shares used | 'auto' chose (alpha, step) |")
    print("|---|---|---|---|---|---|")
    for name, labels, kw in (("label-only release, eps_y = 1", released,
                              dict(noise_var=0.0, epsilon_y=1.0)),
                             ("clean (no noise)", y[train], dict(noise_var=0.0))):
        for cw in (None, "balanced"):
            start = time.perf_counter()
            model = IWPClassifier(class_weight=cw, progress=False, random_state=0)
            model.fit(X[train], labels, **kw)
            pred = np.where(model.decision_function(X[test]) > 0, 1.0, -1.0)
            shares = "" if model.class_shares_ is None else \
                f"{model.class_shares_[1]:.4f} positive"
            print(f"| {name} | {cw} | {np.mean(pred == y[test]):.4f} | "
                  f"{balanced_accuracy(pred, y[test]):.4f} | {shares} "
                  f"({time.perf_counter() - start:.1f} s) | "
                  f"({float(np.ravel(model.alpha_)[0]):.3g}, "
                  f"{float(np.ravel(model.learning_rate_)[0]):.3g}) |")
    try:
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        return
    for cw in (None, "balanced"):
        lr = LogisticRegression(class_weight=cw).fit(X[train], y[train])
        pred = lr.predict(X[test])
        print(f"| scikit-learn LogisticRegression, clean | {cw} | {np.mean(pred == y[test]):.4f} | "
              f"{balanced_accuracy(pred, y[test]):.4f} | | |")


if __name__ == "__main__":
    main()
