"""Plan a release before making it: the noise a budget implies and what one pass can learn from it.

``plan_release(...)`` builds the same ``ReleaseSpec`` a release with these parameters would carry,
so its sigma and keep probability are the release's own (one calibration code path), then states
what they mean for learning:

- **variance growth with |theta|**: the IWP gradient of a row, relative to the clean gradient of the
  same row, has its second moment multiplied by (leading order, rows at the bound B)

      label part    (2 S~ - 1)^2 = 1 / (2 S - 1)^2           (randomized response, S = keep prob.)
      feature part  1 + p sigma^2 / B^2                        (E|x~|^2 / |x|^2 for |x| = B)
      score part    exp(sigma^2 |theta|^2)  exponential loss   (log-normal factor of e^{-theta^T eta})
                    1                       quadratic, logistic, squared error (polynomial in the noise)

  (the label part is the paper's 1 + 4 S~(S~ - 1) of its Theorem 4.3; the score part is why the
  exponential loss needs a radius or a variance cap: at sigma^2 |theta|^2 = 8 it is ~3000).
- **what n rows can detect**: at theta = 0 the IWP gradient of feature j is the debiased
  E[y x_j] (times f'(0)), estimated from n rows with standard error
  sqrt((E[x_j^2] + sigma^2) / n) / (2S - 1).  A feature whose correlation with the label
  r_j = E[y x_j] / sqrt(E[x_j^2]) is below two standard errors is indistinguishable from noise:

      r_min = 2 sqrt((1 + p sigma^2 / B^2) / n) / (2S - 1),   with E[x_j^2] = B^2 / p

  (each coordinate's share of the bound; smaller features are harder), and the rows needed to
  detect a correlation r are n(r) = 4 (1 + p sigma^2 / B^2) / (r (2S - 1))^2.  Regression replaces
  1/(2S-1)^2 by 1 + sigma_y^2 / B_y^2 (a target at its bound; smaller targets need more rows).

With K public columns (released without noise, scaled into [-1, 1]: each adds at most 1 to
|x|^2, which is then at most B^2 + K) only the p - K private ones are noised, so the feature part
is 1 + (p - K) sigma^2 / (B^2 + K) and sigma is calibrated for the private ones; every feature
public (no epsilon_x) is a label-only release: the feature part is 1 and the score part 1.

These are orders of magnitude for deciding a budget, not guarantees.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .exceptions import InvalidInputError
from .label_noise import label_tilde_from_keep
from .laplace import DEFAULT_REGION_FRACTION
from .losses import CLASSIFICATION_LOSSES, REGRESSION_LOSSES, loss_record
from .noise_registry import mechanism_record

#: the |theta| at which the plan tabulates the variance growth
THETA_NORMS = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0)
#: the label correlations for which the plan states the rows needed
CORRELATIONS = (0.05, 0.1, 0.2, 0.3)


@dataclass
class ReleasePlan:
    """What a release with these parameters adds as noise, and what one pass can learn from it."""

    epsilon_x: float | None
    epsilon_y: float | None
    delta: float | None
    bound: float | None
    n_features: int
    loss: str
    task: str
    calibration: str
    sigma: float                      # per-feature noise sd of the release
    label_keep_prob: float | None     # S(eps_y), classification
    target_noise_scale: float | None  # sigma_y, regression
    target_bound: float
    n_rows: int | None = None
    guarantee: str = ""
    n_public: int = 0                 # public (un-noised) features among the n_features
    positive_share: float | None = None   # the class balance, when known (classification)
    variance_rows: list = field(default_factory=list)  # (|theta|, sigma^2|theta|^2, factor)
    mechanism: str = "gaussian"       # "laplace": pure epsilon, L1 bound, discrete Laplace noise

    @property
    def _inverse(self) -> str:
        """The learner's inverse of the mechanism's law (``iwpfast.noise_registry``)."""
        return mechanism_record(self.mechanism).inverse

    @property
    def label_factor(self) -> float:
        """Second-moment factor of the label noise: 1/(2S-1)^2, or 1 + sigma_y^2/B_y^2."""
        if self.task == "regression":
            s = self.target_noise_scale or 0.0
            return 1.0 + s * s / (self.target_bound ** 2)
        if self.label_keep_prob is None:
            return 1.0
        return 1.0 / (2.0 * self.label_keep_prob - 1.0) ** 2

    @property
    def vector_bound2(self) -> float:
        """The largest |x|^2 of a released clean row: B^2 over the private columns plus 1 per
        public column."""
        return (self.bound or 0.0) ** 2 + self.n_public

    @property
    def feature_factor(self) -> float:
        """E|x~|^2 / |x|^2 for a row at the bound: 1 + (p - K) sigma^2 / (B^2 + K)."""
        return 1.0 + (self.n_features - self.n_public) * self.sigma ** 2 / self.vector_bound2

    def score_factor(self, theta_norm: float) -> float:
        energy = self.sigma ** 2 * theta_norm ** 2
        if self._inverse == "laplace" and loss_record(self.loss).laplace == "product":
            # the Laplace inverse's second-moment factor with the energy in one coordinate,
            # (1 - E/2)^2 / (1 - 2E), infinite from E = 1/2 (docs/math.md "Pure epsilon")
            return math.inf if energy >= 0.5 else (1.0 - energy / 2) ** 2 / (1.0 - 2.0 * energy)
        return loss_record(self.loss).score_factor(energy)

    def gradient_variance_factor(self, theta_norm: float) -> float:
        """Leading-order factor on a row's gradient second moment, IWP vs clean (module docstring)."""
        return self.label_factor * self.feature_factor * self.score_factor(theta_norm)

    def detectable_correlation(self, n_rows: int | None = None) -> float | None:
        """r_min: the smallest feature-label correlation n rows tell from noise (two standard errors)."""
        n = self.n_rows if n_rows is None else n_rows
        return None if n is None else self._correlation_detected_by(n)

    def _correlation_detected_by(self, n_rows: int) -> float:
        return 2.0 * math.sqrt(self.label_factor * self.feature_factor / n_rows)

    def rows_needed(self, correlation: float) -> int:
        """Rows for a correlation ``correlation`` to stand two standard errors above the noise."""
        return int(math.ceil(4.0 * self.label_factor * self.feature_factor / correlation ** 2))

    def majority_verdict(self, cap: float = 2.0) -> list[str]:
        """Lines on whether a model held by the variance cap can move predictions off the
        majority class: the cap allows |theta| <= sqrt(cap)/sigma along the private columns, so
        their scores stay within +-sqrt(cap) B/sigma, against the majority class's score
        |b*| = |logit(p)| / c (c: the loss's log-odds scale; 1 without one); and what would."""
        p = self.positive_share
        if p is None or self.task != "classification" or self.sigma <= 0 or self.bound is None:
            return []
        record = loss_record(self.loss)
        c = record.log_odds_scale or 1.0
        b_star = abs(math.log(p / (1.0 - p))) / c
        reach = math.sqrt(cap) * self.bound / self.sigma
        lines = [f"class balance: {p:.3g} positive: always predicting the majority class scores "
                 f"|b*| = {b_star:.3g}; the cap sigma^2|theta|^2 <= {cap:g} keeps |theta| <= "
                 f"{math.sqrt(cap) / self.sigma:.3g} along the private columns, so their part of a "
                 f"score stays within +-{reach:.3g} (rows at the bound B)"]
        if reach <= b_star:
            need_sigma = math.sqrt(cap) * self.bound / max(b_star, 1e-12)
            lines.append(
                "  it cannot move any prediction off the majority class: expect a constant model "
                "unless public columns carry the signal. What would: sigma <= "
                f"{need_sigma:.3g} (a larger epsilon_x: `iwpfast plan` with more), or declaring "
                "informative columns public (their coefficients are not capped); more rows do "
                "not lift the cap")
        elif reach <= 2 * b_star:
            lines.append("  only rows near the bound can move off the majority class: expect few "
                         "minority predictions; a larger epsilon_x or public columns lift the limit")
        return lines

    def describe(self) -> str:
        p = self.n_features
        heavy_tailed = loss_record(self.loss).heavy_tailed
        k = self.n_public
        budget = ("no epsilon_x (label-only)" if self.epsilon_x is None
                  else f"epsilon_x={self.epsilon_x:g}")
        lines = [f"budget:        {budget}"
                 + (f", epsilon_y={self.epsilon_y:g}" if self.epsilon_y is not None else
                    ", public labels")
                 + (f", delta={self.delta:g}" if self.delta is not None else "")
                 + f"; {self.guarantee}"]
        if self.bound is None:
            lines.append(f"features:      p={p}, all public (no feature noise)")
        else:
            law = mechanism_record(self.mechanism)
            norm = f"{law.norm} bound B={self.bound:g}" + (
                "" if law.calibrate is not None else f", {law.wording}")
            lines += [f"features:      p={p}" + (f" ({k} public, {p - k} private)" if k else "")
                      + f", {norm}" + (" over the private ones" if k else "")
                      + ("" if law.calibrate is None else f", calibration {self.calibration}"),
                      f"sigma:         {self.sigma:.6g} per {'private ' if k else ''}feature (what "
                      f"the release will add; sigma^2 = {self.sigma ** 2:.4g}, "
                      f"(p - K) sigma^2 / (B^2 + K) = {self.feature_factor - 1:.3g})"]
        if self.task == "classification":
            if self.label_keep_prob is not None:
                keep = self.label_keep_prob
                lines.append(f"keep prob.:    {keep:.6g} (randomized response; the debiasing "
                             f"weight S~ = {label_tilde_from_keep(keep):.4g})")
            else:
                lines.append("keep prob.:    1 (labels released without noise)")
        elif self.target_noise_scale is not None:
            lines.append(f"target sigma:  {self.target_noise_scale:.6g} (target bound {self.target_bound:g})")
        lines.append(f"gradient variance, IWP vs clean, loss {self.loss} (leading order, rows at the bound):")
        lines.append(f"  label x{self.label_factor:.3g}, features x{self.feature_factor:.3g}"
                     + ((", score x (1 - E/2)^2 / (1 - 2E), E = sigma^2 |theta|^2 in one coordinate:"
                         if self._inverse == "laplace" else ", score x exp(sigma^2 |theta|^2):")
                        if heavy_tailed else ":"))
        lines.append("    |theta|   sigma^2|theta|^2   variance factor")
        for r, v, f in self.variance_rows:
            lines.append(f"    {r:7.3g}   {v:16.4g}   {f:15.4g}")
        if heavy_tailed and self.sigma > 0 and self._inverse == "laplace":
            # the default cap's continuous limit: DEFAULT_REGION_FRACTION^2 * Var / (4 b^2), Var ~ 2 b^2
            cap = DEFAULT_REGION_FRACTION ** 2 / 2
            lines.append("  finite only while every |theta_j| < 1/(2b): the learner's default cap keeps "
                         f"sigma^2|theta|^2 <= {cap:.3g} (|theta| <= {math.sqrt(cap) / self.sigma:.3g})")
        elif heavy_tailed and self.sigma > 0:
            lines.append("  keep sigma^2|theta|^2 small: a variance cap of 2 (fit --variance-cap 2) "
                         f"bounds |theta| by {math.sqrt(2.0) / self.sigma:.3g}"
                         + (" along the private columns (the public ones are not capped)" if k else ""))
        if heavy_tailed:
            lines += self.majority_verdict()
        if self.n_rows is not None:
            r = self._correlation_detected_by(self.n_rows)
            lines.append(f"with {self.n_rows:,} rows: one pass tells from noise only features whose "
                         f"correlation with the label is above r_min = {r:.3g}")
            if r >= 0.3:
                baseline = ("the intercept alone (the majority class)" if self.task == "classification"
                            else "the intercept alone (the mean target)")
                lines.append("  that is more than most real features have: expect a model no better "
                             f"than {baseline}; release more rows or spend more budget")
            elif r >= 0.1:
                lines.append("  only strong features will be learned; weak ones stay near 0")
        lines.append("rows needed to detect a correlation r: "
                     + ", ".join(f"r={c:g}: {self.rows_needed(c):,}" for c in CORRELATIONS))
        return "\n".join(lines)


def plan_release(*, epsilon_x: float | None, delta: float | None, bound: float | None,
                 n_features: int, epsilon_y: float | None = None, n_rows: int | None = None,
                 loss: str | None = None, task: str | None = None,
                 calibration: str = "analytic", target_bound: float = 1.0,
                 n_public: int = 0, positive_share: float | None = None,
                 mechanism: str = "gaussian") -> ReleasePlan:
    """The noise of a release with these parameters (from the release's own ``ReleaseSpec``) and
    what one pass of ``n_rows`` rows can learn from it (module docstring).  ``n_public``: how
    many of the features are public (released without noise; all of them and no epsilon_x: a
    label-only release).  ``positive_share``: the share of positive labels, when known: the plan
    then says whether a capped model can move predictions off the majority class."""
    if positive_share is not None and not 0.0 < float(positive_share) < 1.0:
        raise InvalidInputError(f"positive_share={positive_share!r} must be in (0, 1) (the share of "
                                "positive labels; CLI: --positive-share)")
    if isinstance(n_features, bool) or not isinstance(n_features, int) or n_features < 1:
        raise InvalidInputError(f"n_features={n_features!r} must be a positive integer (the number "
                                "of released features; CLI: --features P)")
    if n_rows is not None and (isinstance(n_rows, bool) or not isinstance(n_rows, int) or n_rows < 1):
        raise InvalidInputError(f"n_rows={n_rows!r} must be a positive integer (CLI: --rows N)")
    if task is None:
        task = "regression" if loss in REGRESSION_LOSSES else "classification"
    if loss is None:
        loss = "squared_error" if task == "regression" else "exponential"
    allowed = REGRESSION_LOSSES if task == "regression" else CLASSIFICATION_LOSSES
    if loss not in allowed:
        raise InvalidInputError(f"loss={loss!r} does not fit task {task!r}; choose one of "
                                f"{', '.join(allowed)}")
    from .privacy import ReleaseSpec
    features = tuple(f"x{j}" for j in range(n_features))
    kw: dict[str, Any] = {}
    if task == "regression":
        kw = dict(target_range=(-1.0, 1.0), target_bound=target_bound)
    if isinstance(n_public, bool) or not isinstance(n_public, int) or not 0 <= n_public <= n_features:
        raise InvalidInputError(f"n_public={n_public!r} must be an integer in 0..{n_features} (the "
                                "public features among the n_features; CLI: --public K)")
    from .privacy.spec_rules import release_deltas
    public = features[n_features - n_public:]
    # label-only (every feature public, no epsilon_x): no feature delta nor bound, the target's
    # delta the one given; the rules `iwpfast release` applies (privacy/spec_rules.py)
    kw.update(release_deltas(epsilon_x=epsilon_x, features=features, public_features=public,
                             task=task, delta=delta, bound=bound, mechanism=mechanism))
    spec = ReleaseSpec(epsilon_x=epsilon_x, epsilon_y=epsilon_y,
                       features=features, ranges={f: (-1.0, 1.0) for f in features}, label="y",
                       task=task, calibration=calibration, mechanism=mechanism,
                       public_features=public, **kw)
    plan = ReleasePlan(
        epsilon_x=spec.epsilon_x, epsilon_y=spec.epsilon_y, delta=spec.delta, bound=spec.bound,
        n_features=n_features, loss=loss, task=task, calibration=calibration, sigma=spec.sigma,
        label_keep_prob=spec.label_keep_prob, target_noise_scale=spec.target_noise_scale,
        target_bound=float(target_bound), n_rows=n_rows, guarantee=spec.guarantee().statement,
        n_public=n_public,
        positive_share=None if positive_share is None else float(positive_share),
        mechanism=mechanism)
    plan.variance_rows = [(r, spec.sigma ** 2 * r * r, plan.gradient_variance_factor(r))
                          for r in THETA_NORMS]
    return plan
