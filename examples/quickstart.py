"""Quickstart: release -> fit -> evaluate -> private_risk on the shipped ACS 2024 income data.

Run:  python examples/quickstart.py        (a few seconds; writes into a temporary directory)
"""
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

import iwpfast
from iwpfast.datasets import ACS_FEATURE_RANGES, acs_path
from iwpfast.privacy import ReleaseSpec, release

FEATURES = ["AGEP", "SEX", "SCHL", "WKHP"]

with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    # 0. split the (clean) data: 80% to release for training, 20% kept as a hold-out
    table = pq.read_table(str(acs_path("income")))
    order = np.random.default_rng(0).permutation(table.num_rows)
    n_train = int(0.8 * table.num_rows)
    pq.write_table(table.take(order[:n_train]), tmp / "train.parquet")
    pq.write_table(table.take(order[n_train:]), tmp / "test.parquet")

    # 1. the data holder releases the training rows under (4, 1e-5)-LDP (2 on features, 2 on labels)
    spec = ReleaseSpec(epsilon_x=2.0, epsilon_y=2.0, delta=1e-5, bound=2.0, features=FEATURES,
                       ranges=ACS_FEATURE_RANGES["income"], label="y")
    release(tmp / "train.parquet", tmp / "train_ldp.parquet", spec, seed=1)  # seed: simulation only
    print(iwpfast.read_release_spec(tmp / "train_ldp.parquet").describe(), "\n")

    # 2. the learner fits on the release: sigma, the keep probability and the columns come from
    #    the file's metadata.  Tail averaging and a variance cap keep the single pass stable.
    params = dict(loss="exponential", alpha=1.0, learning_rate=1e-3, batch_size=128,
                  average="tail", variance_cap=2.0, progress=False)
    model = iwpfast.IWPClassifier(**params).fit(tmp / "train_ldp.parquet")
    naive = iwpfast.IWPClassifier(correction="none", **params).fit(tmp / "train_ldp.parquet")
    model.save(tmp / "model.json")
    model = iwpfast.load(tmp / "model.json")

    # 3. evaluate on the clean hold-out (raw units: raw=True scales it as the release did)
    for name, m in (("IWP-SGD", model), ("naive SGD", naive)):
        print(f"{name:10s} accuracy {m.score(tmp / 'test.parquet', raw=True):.4f}  "
              f"risk {m.risk(tmp / 'test.parquet', raw=True):.4f}  coef {np.round(m.coef_.ravel(), 3)}")

    # 4. without clean data: release the hold-out too and estimate the clean risk from it
    release(tmp / "test.parquet", tmp / "test_ldp.parquet", spec, seed=2)
    est = model.private_risk(tmp / "test_ldp.parquet")
    print(f"\nprivate_risk on the released hold-out: {est.risk:.4f} +- {est.stderr:.4f} "
          f"(clean risk above: {model.risk(tmp / 'test.parquet', raw=True):.4f})")
