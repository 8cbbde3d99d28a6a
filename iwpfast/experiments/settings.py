"""The paper's experiments as :class:`~iwpfast.experiments.common.Setting` objects.

Numbers from the paper (Sec. 5, App. E) and issue 6; the unstated choices are docs/design.md section 6's
and are listed in docs/results.md.
"""
from __future__ import annotations

from typing import Any

from .common import Setting

_SYN: dict[str, Any] = dict(data="synthetic", loss="exponential", alpha=5.0, batch_size=128,
                            learning_rate=1e-4, n_train=1_000_000, seeds_vary="data")
_ACS: dict[str, Any] = dict(loss="exponential", alpha=10.0, batch_size=50, learning_rate=2e-5, epsilon=2.0,
                            n_train=None, seeds_vary="noise")

SETTINGS: dict[str, Setting] = {}


def _add(s: Setting) -> None:
    SETTINGS[s.name] = s


_add(Setting(name="synthetic-p2", title="Synthetic, p = 2, exponential loss, (2, 1e-5)-LDP",
             n_features=2, epsilon=2.0, **_SYN))
_add(Setting(name="synthetic-p10", title="Synthetic, p = 10, exponential loss, (5, 1e-5)-LDP",
             n_features=10, epsilon=5.0, **_SYN))
_add(Setting(name="acs-income", title="ACSIncome 2024 (FL, NY, PA), exponential loss, (2, 1e-5)-LDP",
             data="income", **_ACS))
_add(Setting(name="acs-pubcov",
             title="ACSPublicCoverage 2024 (FL, NY, PA), exponential loss, (2, 1e-5)-LDP",
             data="pubcov", **_ACS))

# App. E: the same runs with the log loss; IWP with K by the MSE rule and K = 1, 2, 3.
_LOG: dict[str, Any] = dict(loss="logistic", truncations=("mse", 1, 2, 3))
for base in ("synthetic-p2", "synthetic-p10", "acs-income", "acs-pubcov"):
    b = SETTINGS[base]
    _add(Setting(**{**b.__dict__, **_LOG, "name": f"logloss-{base}",
                    "title": b.title.replace("exponential loss", "logistic loss")}))

# App. E: linear regression of the income (PINCP scaled from its declared range), ACS income features.
_add(Setting(name="regression", title="ACSIncome 2024, income regression (squared error), (2, 1e-5)-LDP",
             data="income", target="income", loss="squared_error", alpha=10.0, batch_size=128,
             learning_rate=5e-6, epsilon=2.0, n_train=None, seeds_vary="noise"))

#: Names accepted by ``iwpfast experiment``: single settings and groups.
GROUPS = {
    "logloss": [f"logloss-{b}" for b in ("synthetic-p2", "synthetic-p10", "acs-income", "acs-pubcov")],
    "all": ["synthetic-p2", "synthetic-p10", "acs-income", "acs-pubcov",
            "logloss-synthetic-p2", "logloss-synthetic-p10", "logloss-acs-income",
            "logloss-acs-pubcov", "regression"],
}


def expand(name: str) -> list[str]:
    from ..exceptions import InvalidInputError
    from .multiclass import MULTICLASS_GROUP, MULTICLASS_SETTINGS

    if name in SETTINGS or name in MULTICLASS_SETTINGS:
        return [name]
    if name == "multiclass":
        return list(MULTICLASS_GROUP)
    if name in GROUPS:
        return list(GROUPS[name])
    raise InvalidInputError(
        f"unknown experiment {name!r}; choose one of "
        f"{', '.join([*SETTINGS, *GROUPS, 'multiclass', *MULTICLASS_SETTINGS])}")
