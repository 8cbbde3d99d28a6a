"""The state of one estimator's pass over the data, kept apart from the fitted attributes.

A pass is what ``fit`` runs in one go and what successive ``partial_fit`` calls continue.  Its
state lives in one ``PassState`` (``estimator._pass``), not in private attributes scattered over
the estimator: the head's configuration and carried SGD state, the columns it reads, the noise it
debiases for, and the classes found so far (the rows of an unfinished batch are carried in
the head state).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..sgd.state import HeadConfig, HeadState
from ._heads import Heads, OneVsRestHeads
from ._noise import NoiseModel

ARRAY_LABEL = "__label__"      # the label column's name when fitting on in-memory arrays
ARRAY_WEIGHT = "__sample_weight__"  # the sample-weight column's name for in-memory arrays


@dataclass
class PassPlan:
    """What a pass reads and how: the input prepared for the driver (``InputsMixin._prepare_source``).

    source:        what the driver reads (a Source, or an ``ArraySource`` for in-memory arrays)
    features:      the feature columns, in the model's order
    label:         the label column (``ARRAY_LABEL`` for arrays)
    noise:         the noise the pass debiases for (release metadata or explicit arguments)
    rows:          the number of rows, when the source knows it
    names:         the input's own feature names (a DataFrame's columns: ``feature_names_in_``)
    config:        the head's configuration, once made (``IWPBase._make_config``)
    sample_weight: the column of sample weights the driver reads (None: unweighted)
    engine:        the update engine the driver runs ("numba"; "numpy" with IWPFAST_ENGINE=numpy,
                   ``iwpfast.settings``)
    make_config:   rows -> the head's configuration for a pass over that many rows
                   (``IWPBase.plan_pass`` sets it; ``config_for`` calls it)
    """

    source: Any
    features: list[str]
    label: str
    noise: NoiseModel
    rows: int | None
    names: list[str] | None = None
    config: HeadConfig | None = None
    sample_weight: str | None = None
    engine: str = "numba"
    make_config: Callable[[int | None], HeadConfig] | None = field(default=None, repr=False)

    def made_config(self) -> HeadConfig:
        """The head's configuration (an error before it is made)."""
        if self.config is None:
            raise RuntimeError("the pass plan has no configuration yet")
        return self.config

    def config_for(self, rows: int | None) -> HeadConfig:
        """The head's configuration for a pass over ``rows`` rows (a shard of the plan's source)."""
        if self.make_config is None:
            raise RuntimeError("this plan makes no configurations; IWPBase.plan_pass makes one that does")
        return self.make_config(rows)


@dataclass
class PassState:
    """Everything carried from one call of a pass to the next (``fit`` starts a new one)."""

    heads: Heads | None = None             # the heads trained (``_heads``); None before the start
    features: list[str] | None = None      # the feature columns read, in the model's order
    label: str = ARRAY_LABEL               # the label column read
    sample_weight: str | None = None       # the sample-weight column read (None: unweighted)
    noise: NoiseModel | None = None        # the noise the pass debiases for
    classes: np.ndarray | None = None      # the two classes found so far (classifier)
    classes_hint: np.ndarray | None = None  # partial_fit(classes=...)
    rr: Any = None                         # a randomized-response pass (``_rr.RRStream``)
    # (w_-, w_+) of class_weight (classifier, two classes), set before the configs are made
    class_weights: tuple | None = None

    def running(self) -> Heads:
        """The pass's heads (an error before the pass started)."""
        if self.heads is None:
            raise RuntimeError("the pass has no heads yet")
        return self.heads

    @property
    def config(self) -> HeadConfig | None:
        """The (first) head's configuration ('paper' resolved once run)."""
        return None if self.heads is None else self.heads.config

    @property
    def head(self) -> HeadState | None:
        """The (first) head's SGD state; None before the first update."""
        return None if self.heads is None else self.heads.state

    @property
    def ovr(self) -> OneVsRestHeads | None:
        """The k one-vs-rest heads of a k-class pass, else None."""
        return self.heads if isinstance(self.heads, OneVsRestHeads) else None

    @property
    def started(self) -> bool:
        """True once the pass has a head state (an update ran, or a model was loaded with one)."""
        return self.head is not None
