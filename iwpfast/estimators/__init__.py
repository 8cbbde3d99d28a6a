"""scikit-learn-style estimators on top of the single-pass streaming driver.

``IWPClassifier`` and ``IWPRegressor`` follow scikit-learn's conventions without depending on it:
keyword-only hyper-parameters stored exactly as given, validated at ``fit`` time (every message
names the parameter and the fix), fitted attributes ending in ``_``, ``get_params``/``set_params``
(so ``sklearn.base.clone`` works).  ``fit`` on a released file reads the noise parameters from the
release metadata, so a model can never be debiased with the wrong sigma.

The package reads apart (dependencies point down the list):
``_noise``   the noise model (release metadata or explicit arguments);
``_state``   ``PassPlan``, what a pass reads and how; ``PassState``, what one pass carries
            from call to call;
``_params``  hyper-parameters: scikit-learn's parameter protocol and their validation;
``_inputs``  input preparation (arrays, frames, sources) for the driver;
``_heads``   the heads a pass trains: one, or k one-vs-rest (``SingleHead``, ``OneVsRestHeads``);
``_multiclass`` the k-class labels (codes, label weights, the encoder and mapper that choose k);
``_tuned``   alpha / learning_rate = "auto": the derived grid and the tuned fit;
``_evaluation`` prediction, clean score and risk, private risk;
``_base``    the pass (fit / partial_fit through the driver, plan_pass / adopt_pass), save;
``_report``  ``EvaluationReport``: a classifier's verdict on clean data (evaluate_report);
``_document`` the estimator's part of its model file (``save``, ``load``);
``classifier``, ``regressor``  the two public estimators.

Everything heavy is imported lazily: importing this package compiles nothing.
"""
from __future__ import annotations

from ..estimates import RiskEstimate
from ._base import IWPBase
from ._noise import NoiseModel
from ._params import CORRECTIONS
from ._report import EvaluationReport
from .classifier import IWPClassifier
from .regressor import IWPRegressor


def load(path, filesystem=None):
    """Load a model written by ``save`` (checks the format version and integrity); ``path`` may
    be a URI or a path on ``filesystem`` (a pyarrow or fsspec filesystem)."""
    import os

    from ..exceptions import InvalidInputError
    from ..model_io import read_model_document

    doc = read_model_document(path, filesystem)
    try:
        classes: dict[str, type[IWPBase]] = {"IWPClassifier": IWPClassifier,
                                             "IWPRegressor": IWPRegressor}
        cls = classes[doc["estimator"]]
        return cls._from_document(doc)
    except InvalidInputError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInputError(f"model file {os.fspath(path)!r} is corrupt or incomplete ({exc!r}); "
                                "re-create it with model.save(path) or `iwpfast fit`") from None


__all__ = ["CORRECTIONS", "EvaluationReport", "IWPClassifier", "IWPRegressor", "NoiseModel",
           "RiskEstimate", "load"]
