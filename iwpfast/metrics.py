"""Scorers for scikit-learn's model selection on private releases.

A fold of a release holds noisy features and noisy labels: accuracy or R^2 on it measures the
model against the noise.  ``private_scorer`` scores a fitted model by the *debiased* risk of the
fold instead (the mean IWP loss, unbiased for the clean risk; ``IWPClassifier.private_risk``),
negated so that greater is better, as scikit-learn's scorers are::

    from sklearn.model_selection import cross_val_score
    import iwpfast, iwpfast.metrics

    rel = iwpfast.privacy.privatize(X, y, spec)                  # or read_release(path)
    est = iwpfast.IWPClassifier(release_spec=rel.spec)           # arrays are rows of that release
    cross_val_score(est, rel.X, rel.y, scoring=iwpfast.metrics.private_scorer)

The fold's noise comes from the estimator's ``release_spec`` (else from ``release_spec_``, the
release it was fitted on, which is the fold's own release under ``cross_val_score``);
``make_private_scorer(spec)`` names the spec explicitly.  A path or source holding a release
is scored with its own metadata.
"""
from __future__ import annotations

import warnings

__all__ = ["make_private_scorer", "private_scorer"]


def make_private_scorer(release_spec=None, *, class_weighted=None, quiet: bool = True):
    """A scorer ``scorer(estimator, X, y=None, sample_weight=None) -> float``: minus the
    estimator's debiased risk on the fold (``private_risk``), greater is better.

    release_spec: the ``ReleaseSpec`` of the release the folds' arrays hold; None: the
        estimator's ``release_spec`` parameter, else the ``release_spec_`` it was fitted on.
    class_weighted: as for ``private_risk`` (None: the model's own objective).
    quiet: True silences ``private_risk``'s warning that a fold's estimate is not reliable
        (a search scores many small folds; the estimates' mean is still unbiased).
    """
    def scorer(estimator, X, y=None, sample_weight=None) -> float:
        from .estimators._base import released_arrays
        from .estimators._inputs import with_release
        from .exceptions import InvalidInputError, NumericalWarning

        spec = release_spec
        if spec is None:
            spec = getattr(estimator, "release_spec", None)
        if spec is None:
            spec = getattr(estimator, "release_spec_", None)
        if y is not None and released_arrays(X):
            if spec is None:
                raise InvalidInputError(
                    "private_scorer needs the noise of the fold's release: fit the estimator "
                    "with release_spec=spec (IWPClassifier(release_spec=spec)), or use "
                    "make_private_scorer(spec)")
            X, y = with_release(X, y, spec, None)
        with warnings.catch_warnings():
            if quiet:
                warnings.simplefilter("ignore", NumericalWarning)
            est = estimator.private_risk(X, y, sample_weight, class_weighted=class_weighted)
        return -float(est.risk)

    scorer.__doc__ = ("minus the debiased risk of a fold of a private release (greater is "
                      "better); see iwpfast.metrics.make_private_scorer")
    return scorer


#: ``make_private_scorer()``: the spec from the estimator (``release_spec``, else the release it
#: was fitted on); ``cross_val_score(est, X, y, scoring=iwpfast.metrics.private_scorer)``
private_scorer = make_private_scorer()
