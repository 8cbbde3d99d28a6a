"""The state of one estimator's pass over the data, kept apart from the fitted attributes.

A pass is what ``fit`` runs in one go and what successive ``partial_fit`` calls continue.  Its
state lives in one ``PassState`` (``estimator._pass``), not in private attributes scattered over
the estimator: the head's configuration and carried SGD state, the columns it reads, the noise it
debiases for, and the classes found so far (the rows of an unfinished batch are carried in
the head state).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..sgd.state import HeadConfig, HeadState
from ._noise import NoiseModel

HEAD_NAME = "model"            # the name of the single head an estimator trains
ARRAY_LABEL = "__label__"      # the label column's name when fitting on in-memory arrays
ARRAY_WEIGHT = "__sample_weight__"  # the sample-weight column's name for in-memory arrays


@dataclass
class PassState:
    """Everything carried from one call of a pass to the next (``fit`` starts a new one)."""

    config: HeadConfig | None = None       # the head's configuration ('paper' resolved once run)
    features: list[str] | None = None      # the feature columns read, in the model's order
    label: str = ARRAY_LABEL               # the label column read
    sample_weight: str | None = None       # the sample-weight column read (None: unweighted)
    noise: NoiseModel | None = None        # the noise the pass debiases for
    head: HeadState | None = None          # the SGD state; None before the first update
    classes: np.ndarray | None = None      # the two classes found so far (classifier)
    classes_hint: np.ndarray | None = None  # partial_fit(classes=...)
    ovr: object | None = None              # k > 2 classes: the heads (_multiclass.OneVsRest)

    @property
    def started(self) -> bool:
        """True once the pass has a head state (an update ran, or a model was loaded with one)."""
        return self.head is not None
