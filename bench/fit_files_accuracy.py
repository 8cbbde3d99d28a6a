"""fit_files with K shards against the single-machine fit: distance to the clean optimum theta*.

    python bench/fit_files_accuracy.py --seeds 20 --shards 2,4

The synthetic p = 10 task of ``iwpfast experiment synthetic-p10``: per seed a fresh draw of 10^6
training rows (features in [-1, 1], bound sqrt(10)), theta* = the clean regularized optimum
(exponential loss, lambda = 5), a release with (2.5, 1e-5) on the features and 2.5 on the labels
(the experiment's even split of epsilon = 5; analytic calibration) written by ``iwpfast.release``
with the seed, then on the same file:

- ``fit``: ``IWPClassifier(loss="exponential", alpha=5, learning_rate=1e-4, batch_size=128,
  fit_intercept=False)`` (the experiment's head; last iterate, projection radius B / lambda);
- ``K=k``: ``iwpfast.distributed.fit_files(client, file, same estimator, shards=k)`` on a local
  Dask cluster of 2 workers (step x k per shard, one merge at the end).

For each method, as ``iwpfast experiment`` reports them: |mean theta - theta*| over the seeds in
standard errors (sqrt(trace Cov / S)) and the mean per-seed |theta - theta*|.  The goals: the
seed mean within 3 standard errors of theta*, and the mean per-seed distance of K shards within
1.25x that of ``fit``.
"""
from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from iwpfast.benchmarks import cpu_model  # noqa: E402


def main():
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--shards", default="2,4")
    ap.add_argument("--rows", type=int, default=None, help="training rows (default: the task's 10^6)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--same-step", action="store_true",
                    help="also K shards at the single pass's step (no rescaling), to show why the "
                         "step is rescaled")
    ap.add_argument("--dir", default="/tmp/iwpfast-bench-fitfiles")
    args = ap.parse_args()
    import pyarrow as pa
    from distributed import Client, LocalCluster

    import iwpfast
    from iwpfast.distributed import fit_files
    from iwpfast.experiments.common import make_dataset
    from iwpfast.experiments.settings import SETTINGS
    from iwpfast.solvers import solve

    setting = SETTINGS["synthetic-p10"]
    shard_list = [int(k) for k in args.shards.split(",")]
    p = setting.n_features
    features = [f"x{j}" for j in range(p)]
    spec = iwpfast.ReleaseSpec(epsilon_x=setting.epsilon / 2, epsilon_y=setting.epsilon / 2,
                               delta=setting.delta, bound=math.sqrt(p),
                               ranges={f: (-1, 1) for f in features})
    params = dict(loss=setting.loss, alpha=setting.alpha, learning_rate=setting.learning_rate,
                  batch_size=setting.batch_size, fit_intercept=False, progress=False)
    methods = ["fit"] + [f"K={k}" for k in shard_list]
    if args.same_step:
        methods += [f"K={k} same step" for k in shard_list]
    diffs = {m: [] for m in methods}
    seconds = {m: 0.0 for m in methods}
    os.makedirs(args.dir, exist_ok=True)
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None)
    client = Client(cluster)
    t_all = time.perf_counter()
    try:
        for seed in range(args.seeds):
            data = make_dataset(setting, seed, args.rows)
            X = data.X_train_fm
            theta_star = solve(X.T, data.y_train, loss=setting.loss, alpha=setting.alpha).theta
            table = pa.table({**{f: X[j] for j, f in enumerate(features)},
                              "y": data.y_train.astype(np.int8)})
            path = os.path.join(args.dir, f"release-{seed}.parquet")
            iwpfast.release(table, path, spec, features=features, label="y", seed=seed,
                            overwrite=True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                ref = iwpfast.IWPClassifier(**params).fit(path)
                seconds["fit"] += time.perf_counter() - t0
                diffs["fit"].append(ref.coef_.ravel() - theta_star)
                for k in shard_list:
                    t0 = time.perf_counter()
                    m = fit_files(client, path, iwpfast.IWPClassifier(**params), shards=k,
                                  rounds=args.rounds)
                    seconds[f"K={k}"] += time.perf_counter() - t0
                    diffs[f"K={k}"].append(m.coef_.ravel() - theta_star)
                    if args.same_step:  # fit_files multiplies the step by k: give it step / k
                        same = {**params, "learning_rate": params["learning_rate"] / k}
                        t0 = time.perf_counter()
                        m = fit_files(client, path, iwpfast.IWPClassifier(**same), shards=k,
                                      rounds=args.rounds)
                        seconds[f"K={k} same step"] += time.perf_counter() - t0
                        diffs[f"K={k} same step"].append(m.coef_.ravel() - theta_star)
            os.remove(path)
            line = "  ".join(f"{m} {np.linalg.norm(diffs[m][-1]):.4f}" for m in methods)
            print(f"seed {seed:2d}: |theta - theta*|  {line}  (|theta*| {np.linalg.norm(theta_star):.3f})",
                  flush=True)
    finally:
        client.close()
        cluster.close()
        shutil.rmtree(args.dir, ignore_errors=True)
    n = args.seeds
    print(f"\nCPU: {cpu_model()} ({os.cpu_count()} cores); load average {os.getloadavg()}; "
          f"{n} seeds, {data.y_train.shape[0]:,} rows each, rounds={args.rounds}; "
          f"total {time.perf_counter() - t_all:.0f} s")
    base = None
    for m in methods:
        D = np.array(diffs[m])                   # (seeds, p): theta - theta*
        dist = np.linalg.norm(D, axis=1)
        mean_d, se_d = dist.mean(), dist.std(ddof=1) / math.sqrt(n)
        bias = D.mean(axis=0)
        # as `iwpfast experiment` reports it: the standard error of the mean error vector's norm,
        # sqrt(trace Cov / S) -- the norm pure seed noise gives (ratio ~1 without bias)
        se_b = math.sqrt(float(np.sum(D.var(axis=0, ddof=1))) / n)
        in_se = np.linalg.norm(bias) / se_b
        base = mean_d if base is None else base
        print(f"{m:15s} |mean theta - theta*| = {np.linalg.norm(bias):.5f} +- {se_b:.5f} = "
              f"{in_se:.2f} SE ({'within' if in_se <= 3 else 'NOT within'} 3); mean per-seed "
              f"|theta - theta*| = {mean_d:.5f} +- {se_d:.5f} = {mean_d / base:.3f}x fit "
              f"({'within' if mean_d / base <= 1.25 else 'NOT within'} 1.25x); "
              f"{seconds[m] / n:.2f} s per fit")


if __name__ == "__main__":
    main()
