"""The heads an estimator trains, as objects it delegates to: one head, or k one-vs-rest heads.

An estimator's pass trains either ``SingleHead`` (a binary classifier or a regressor: one
``HeadConfig``, one ``HeadState``) or ``OneVsRestHeads`` (k > 2 classes: head c learns class c
against the rest, with the label weights of k-ary randomized response; docs/math.md "k classes").
Both answer the same calls, so the estimator never asks which one it has:

- ``start(config)``: the heads' configs from the pass's config; ``adopt(configs, states)``: the
  configs and states a tuning run chose;
- ``run(pass_state, source, kw)``: one call of the streaming driver (the k heads read every batch
  once, as one kernel call per chunk); ``finish(pass_state, engine)``: the rows carried short of a
  batch, as the pass's last update;
- ``set_fitted(est, telemetry)``: the fitted attributes (``coef_``, ``intercept_``,
  ``telemetry_``, ``n_rows_seen_``, ``n_iter_``; one-vs-rest: ``classes_``,
  ``telemetry_per_class_``);
- ``write(fitted, doc)`` / ``read(...)``: their part of the model file;
- the classifier's prediction side: ``theta_b``, ``labels``, ``probabilities``, ``accuracy``,
  ``risk`` and ``private_values`` (the regressor answers those itself).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from ..sgd.state import HeadConfig, HeadState
from ._multiclass import PUBLIC_TABLE, class_codes, equivalent_keep_prob

HEAD_NAME = "model"            # the name of the single head an estimator trains
#: the hyper-parameters a one-vs-rest head may have of its own (saved per head)
PER_HEAD_FIELDS = ("alpha", "learning_rate", "mu", "radius", "variance_cap")


def telemetry_of(state: HeadState) -> dict:
    """A head's telemetry counters by name."""
    from ..sgd.state import TELEMETRY_FIELDS
    return {k: float(state.telemetry[i]) for i, k in enumerate(TELEMETRY_FIELDS)}


@dataclass
class TuneOutcome:
    """What a tuning run chose for the heads: their configs and states, the telemetry by head
    name, the fitted alpha_/learning_rate_ and tuning_, notes to warn about, and the names the
    chosen heads' telemetry warnings give."""

    configs: list
    states: list
    telemetry: dict
    alpha: object
    learning_rate: object
    table: dict
    notes: list
    warn_names: list


@dataclass
class Heads:
    """What both kinds of heads share: their configs and states, one driver call, the finish."""

    configs: list = field(default_factory=list)
    states: list | None = None

    def names(self) -> list[str]:
        raise NotImplementedError

    @property
    def config(self) -> HeadConfig | None:
        """The first head's config (every head shares the step, schedule and averaging)."""
        return self.configs[0] if self.configs else None

    @property
    def state(self) -> HeadState | None:
        """The first head's state (None before the first update)."""
        return None if self.states is None else self.states[0]

    @property
    def ran(self) -> list[HeadState]:
        """The heads' states once they ran (an error before: nothing is fitted yet)."""
        if self.states is None:
            raise RuntimeError("the heads have no state yet: they never ran")
        return self.states

    def adopt(self, configs: list, states: list) -> None:
        self.configs, self.states = list(configs), list(states)

    def run(self, ps, source, kw: dict) -> dict:
        """One call of the streaming driver over ``source`` for these heads (continuing their
        states); returns each head's telemetry by name."""
        from ..sgd import driver
        names = self.names()
        heads = [driver.Head(n, c, list(ps.features), ps.label, sample_weight=ps.sample_weight)
                 for n, c in zip(names, self.configs, strict=True)]
        kw = dict(kw)
        if self.states is not None:
            kw["states"] = dict(zip(names, self.states, strict=True))
        if ps.noise.feature_bound is not None:
            kw["feature_bound"] = ps.noise.feature_bound
        result = driver.fit_stream(source, heads, **kw)
        # 'paper' resolved to its step
        self.configs = [result.configs.get(n, c) for n, c in zip(names, self.configs, strict=True)]
        self.states = [result.states[n] for n in names]
        return {n: dict(result.telemetry.get(n, {})) for n in names}

    def finish(self, ps, engine: str) -> dict | None:
        """Run the rows the heads carry (fewer than a batch) as the pass's last update; their
        telemetry by name, or None when nothing was carried."""
        if self.states is None or not self.states[0].carry_n:
            return None
        from ..sgd import driver
        names = self.names()
        configs = dict(zip(names, self.configs, strict=True))
        states = dict(zip(names, self.states, strict=True))
        driver.finish_states(configs, states, engine=engine, features=ps.features)
        return {n: driver.head_telemetry(configs[n], states[n]) for n in names}

    def coefficients(self, fit_intercept: bool) -> list[tuple[np.ndarray, float]]:
        """(theta, b) of every head: the Polyak average when the pass averages."""
        averaged = self.configs[0].average_start >= 0
        out = [st.coef(averaged) for st in self.ran]
        return out if fit_intercept else [(theta, 0.0) for theta, _ in out]

    # -- what each kind answers (the estimator delegates; docstrings on the two kinds)
    def start(self, config: HeadConfig) -> None:
        raise NotImplementedError

    def note_step(self, est) -> None:
        raise NotImplementedError

    def set_fitted(self, est, telemetry: dict) -> None:
        raise NotImplementedError

    def grid_label_keep_prob(self, noise) -> float | None:
        raise NotImplementedError

    def tune(self, plan, grid, kw) -> TuneOutcome:
        raise NotImplementedError

    def untuned(self, est) -> None:
        raise NotImplementedError

    def write(self, est, fitted: dict, doc: dict, jsonable, state_arrays) -> None:
        raise NotImplementedError

    def check_validation(self, meta: dict) -> None:
        raise NotImplementedError

    @staticmethod
    def theta_b(est) -> tuple:
        raise NotImplementedError

    @staticmethod
    def labels(u: np.ndarray, classes) -> np.ndarray:
        raise NotImplementedError

    @staticmethod
    def probabilities(est, u: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    @staticmethod
    def accuracy(u, targets, sample_weight=None) -> float:
        raise NotImplementedError

    @staticmethod
    def risk(loss: str, u, targets, sample_weight=None) -> float:
        raise NotImplementedError

    @staticmethod
    def per_head_telemetry(est) -> list:
        raise NotImplementedError

    @staticmethod
    def risk_estimate(est, plan, epsilon_y, class_weights=None):
        raise NotImplementedError


@dataclass
class SingleHead(Heads):
    """One head: a binary classifier (coef_ (1, p), intercept_ (1,)) or a regressor ((p,), b)."""

    task: str = "classification"

    def names(self) -> list[str]:
        return [HEAD_NAME]

    def start(self, config: HeadConfig) -> None:
        self.configs, self.states = [config], None

    def note_step(self, est) -> None:
        """The step the pass runs with ('paper' resolved by the driver) is ``learning_rate_``."""
        est.learning_rate_ = self.configs[0].learning_rate

    def set_fitted(self, est, telemetry: dict) -> None:
        [(theta, b)] = self.coefficients(bool(est.fit_intercept))
        state = self.ran[0]
        if self.task == "classification":
            est.coef_, est.intercept_ = theta.reshape(1, -1), np.array([float(b)])
        else:
            est.coef_, est.intercept_ = theta, float(b)
        base = telemetry_of(state)
        base.update(telemetry.get(HEAD_NAME, {}))
        est.telemetry_ = base
        est.n_rows_seen_ = int(base["rows_seen"]) + state.carry_n
        est.n_iter_ = state.step

    def grid_label_keep_prob(self, noise) -> float | None:
        return noise.label_keep_prob

    def tune(self, plan, grid, kw) -> TuneOutcome:
        """The grid of (alpha, step) heads in one scan, chosen on the private hold-out
        (``tuning.tune_stream``)."""
        from ..sgd import tuning
        result = tuning.tune_stream(plan.source, plan.features, plan.label, grid.points,
                                    grid.make_config, **kw)
        chosen = result.points[result.chosen]
        cfg = result.configs[chosen.name]
        table = dict(result.table(), rule=result.rule, n_train=result.n_train,
                     n_validation=result.n_validation, passes=result.passes,
                     heads=result.head_updates_per_row, variance_cap=grid.cap,
                     edge=result.edge, folds=result.folds, notes=grid.notes + result.notes)
        return TuneOutcome([cfg], [result.states[chosen.name]],
                           {HEAD_NAME: dict(result.telemetry.get(chosen.name, {}))}, cfg.alpha,
                           cfg.learning_rate, table, list(result.notes), [chosen.name])

    def untuned(self, est) -> None:
        """Too few rows to tune: nothing to add for one head."""

    # -- the model file
    def write(self, est, fitted: dict, doc: dict, jsonable, state_arrays) -> None:
        doc["state"] = None if self.state is None else state_arrays(self.state)
        # a class-weighted head's label weights (partial_fit after load continues with them)
        cfg = self.config
        if cfg is not None and cfg.label_weights is not None:
            fitted["label_weights"] = jsonable([float(w) for w in cfg.label_weights])
            fitted["class_weight"] = jsonable(getattr(est, "class_weight_", None))
            fitted["class_shares"] = jsonable(getattr(est, "class_shares_", None))

    # -- the classifier's prediction side (two classes)
    @staticmethod
    def theta_b(est) -> tuple[np.ndarray, float]:
        theta = np.asarray(est.coef_, dtype=np.float64).reshape(-1)
        return theta, float(np.asarray(est.intercept_).reshape(-1)[0])

    @staticmethod
    def labels(u: np.ndarray, classes) -> np.ndarray:
        """``classes[1]`` where the score is positive."""
        return np.asarray(classes)[(u > 0).astype(np.intp)]

    @staticmethod
    def probabilities(est, u: np.ndarray) -> np.ndarray:
        positive = est._positive_probability(u)
        return np.column_stack([1.0 - positive, positive])

    @staticmethod
    def accuracy(u, ypm, sample_weight=None) -> float:
        """Accuracy of the scores against +-1 targets (weighted: sum s [correct] / sum s)."""
        return float(np.average(np.where(u > 0, 1.0, -1.0) == ypm, weights=sample_weight))

    @staticmethod
    def risk(loss: str, u, ypm, sample_weight=None) -> float:
        """Mean loss (weighted: (1/n) sum s_i loss_i, the risk a weighted fit minimizes)."""
        from ..losses import derivative
        values = derivative(loss, 0, ypm * u)
        return float(np.mean(values if sample_weight is None else values * sample_weight))

    @staticmethod
    def per_head_telemetry(est) -> list:
        return [est.telemetry_]

    def check_validation(self, meta: dict) -> None:
        """A separate validation release of one head: nothing beyond the shared checks."""

    @staticmethod
    def risk_estimate(est, plan, epsilon_y, class_weights=None):
        """The mean of the rows' IWP losses at the fitted (theta, b) (``private_risk``).

        ``class_weights`` (w_-, w_+): the estimate of the class-weighted risk, each row's loss
        with the weighted table ``label_noise.class_weighted_table`` for the hold-out's keep
        probability (the training's and the hold-out scoring's per-row loss), its constant model
        chosen under the weights, and the plain estimate of the same rows beside it
        (``RiskEstimate.unweighted``)."""
        from ..estimates import (
            ConstantBaseline,
            RiskAccumulator,
            glm_loss_values,
            glm_loss_values_table,
            noise_tau,
        )
        from ..holdout_verdict import PredictionTally, features_are_clean
        from ..label_noise import class_weighted_table, label_tilde_from_keep
        theta, b = est._theta_b()
        noise = plan.noise
        law = None if noise.noise_law is None else noise.noise_law.broadcast(theta.shape[0])
        tau = noise_tau(est.loss, noise.noise_var, theta, law)[0]
        weight = label_tilde_from_keep(noise.label_keep_prob)
        truncation = int(getattr(est, "truncation_", 0))
        acc = RiskAccumulator(1)
        # the best constant model beside the model (classification): released class 1 = +1
        baseline = None if est._task == "regression" else ConstantBaseline(
            est.loss, [(weight, 1.0 - weight, weight, 1.0 - weight)], [1], 2)
        tally = None if baseline is None else PredictionTally(
            est.classes_, baseline.tables[0], features_are_clean(noise))
        # the class-weighted risk: (its table, its sums, its constant model)
        weighted = None
        if class_weights is not None:
            table = class_weighted_table(class_weights, noise.label_keep_prob)
            weighted = (table, RiskAccumulator(1),
                        ConstantBaseline(est.loss, [table], [1], 2, class_weighted=True))
        for cols, yv, sw in est._iter_xy(plan.source, plan.features, plan.label,
                                         plan.sample_weight):
            u = est._linear_scores(theta, b, cols)
            if est._task == "regression":
                r = u - yv
                vals = 0.5 * r * r - tau - 0.5 * noise.target_noise_var
            else:
                vals = glm_loss_values(est.loss, yv * u, tau, weight, truncation)
            vals = vals if sw is None else vals * sw
            acc.add(vals)
            if baseline is not None and tally is not None:
                baseline.add(vals, (yv > 0).astype(np.int64), sw)
                tally.add(u > 0, yv > 0)
            if weighted is not None:
                table, weighted_acc, weighted_baseline = weighted
                wvals = glm_loss_values_table(est.loss, yv * u, yv, tau, table, truncation)
                wvals = wvals if sw is None else wvals * sw
                weighted_acc.add(wvals)
                weighted_baseline.add(wvals, (yv > 0).astype(np.int64), sw)
        estimate = acc.estimates(est.loss, 2.0 * tau)[0]
        if baseline is not None and tally is not None:
            estimate = estimate._replace(baseline=baseline.result(estimate),
                                         predictions=tally.result())
        if weighted is None or class_weights is None:
            return estimate
        _, weighted_acc, weighted_baseline = weighted
        weighted_estimate = weighted_acc.estimates(est.loss, 2.0 * tau)[0]
        return weighted_estimate._replace(
            baseline=weighted_baseline.result(weighted_estimate),
            class_weight=tuple(float(w) for w in class_weights), unweighted=estimate,
            predictions=estimate.predictions)


@dataclass
class OneVsRestHeads(Heads):
    """k > 2 classes: the declared classes (head c is classes[c]), the label weights of k-ary
    randomized response, and the k heads' configs and SGD states."""

    classes: np.ndarray = field(default_factory=lambda: np.zeros(0))
    table: tuple = PUBLIC_TABLE
    class_weights: tuple | None = None      # one weight per class (class_weight), or None

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    def names(self) -> list[str]:
        return [f"class_{c}" for c in range(self.n_classes)]

    def head_configs(self, base: HeadConfig) -> list:
        """k configs from the pass's base config: head c reads class index c; mode iwp uses the
        k-ary label weights (the binary keep probability of the base config does not apply)."""
        if self.class_weights is not None:
            return self._weighted_head_configs(base)
        weights = self.table if base.mode == "iwp" else None
        return [dataclasses.replace(base, label_keep_prob=None, label_class=c, label_weights=weights)
                for c in range(self.n_classes)]

    def _weighted_head_configs(self, base: HeadConfig) -> list:
        """Class weights w: each head's table and the per-class boost of
        ``label_noise.class_weighted_head_tables`` (docs/math.md "Class weights"; private_risk
        uses the same for its hold-out).  Clean or naive heads take the public table: the plain
        weight of the released (= true) class."""
        from ..label_noise import class_weighted_head_tables
        tables, boost = class_weighted_head_tables(
            self.table if base.mode == "iwp" else PUBLIC_TABLE, self.class_weights)
        return [dataclasses.replace(base, label_keep_prob=None, label_class=c, class_boost=boost,
                                    label_weights=tables[c])
                for c in range(self.n_classes)]

    def keep_probability(self) -> float:
        """q of the k-ary randomized response of the labels (1 for public labels), from the
        table: q - r = 1/(table[0] - table[3]), r = -table[3] (q - r)."""
        gap = 1.0 / float(self.table[0] - self.table[3])
        return gap * (1.0 - float(self.table[3]))

    def start(self, config: HeadConfig) -> None:
        self.configs, self.states = self.head_configs(config), None

    def note_step(self, est) -> None:
        """k heads keep ``learning_rate_`` as set (one value, or one per class under "auto")."""

    def set_fitted(self, est, telemetry: dict) -> None:
        coefs = self.coefficients(bool(est.fit_intercept))
        est.coef_ = np.stack([theta for theta, _ in coefs])
        est.intercept_ = np.array([float(b) for _, b in coefs])
        est.classes_ = np.asarray(self.classes)
        per_class = []
        for name, st in zip(self.names(), self.ran, strict=True):
            base = telemetry_of(st)
            base.update(telemetry.get(name, {}))
            per_class.append(base)
        merged = dict(per_class[0])
        for key in ("projection_hits", "cap_hits"):
            merged[key] = sum(t.get(key, 0) for t in per_class)
        for key in ("max_noise_energy", "grad_norm_mean", "theta_norm"):
            if key in merged:
                merged[key] = max(t.get(key, 0.0) for t in per_class)
        for key in ("on_sphere", "capped"):
            if key in merged:
                merged[key] = any(t.get(key, False) for t in per_class)
        est.telemetry_ = merged
        est.telemetry_per_class_ = per_class
        est.n_rows_seen_ = int(merged["rows_seen"]) + self.ran[0].carry_n
        est.n_iter_ = self.ran[0].step

    def grid_label_keep_prob(self, noise) -> float | None:
        """The binary keep probability of the same label factor (``equivalent_keep_prob``)."""
        return equivalent_keep_prob(self.table)

    def tune(self, plan, grid, kw) -> TuneOutcome:
        """k classes: every (grid point, class) pair is a head of the same scan, scored on the same
        hold-out, and each class chooses its own point by the same rule
        (``tuning.tune_stream_classes``; docs/tuning.md "k classes")."""
        from ..sgd import tuning
        from ._multiclass import class_tables
        table = self.table if grid.mode != "clean" else PUBLIC_TABLE
        results = tuning.tune_stream_classes(
            plan.source, plan.features, plan.label, grid.points,
            lambda pt, rows: self.head_configs(grid.make_config(pt, rows)), self.n_classes,
            label_table=table, **kw)
        chosen = [r.points[r.chosen].name for r in results]
        configs = [r.configs[name] for r, name in zip(results, chosen, strict=True)]
        states = [r.states[name] for r, name in zip(results, chosen, strict=True)]
        names = self.names()
        tuning_ = class_tables(self.classes, [r.table() for r in results], [r.rule for r in results],
                               [r.notes for r in results], grid, results[0],
                               edges=[r.edge for r in results])
        return TuneOutcome(configs, states,
                           {n: dict(r.telemetry.get(c, {}))
                            for n, r, c in zip(names, results, chosen, strict=True)},
                           np.array([cfg.alpha for cfg in configs]),
                           np.array([cfg.learning_rate for cfg in configs]), tuning_,
                           tuning_["notes"][len(grid.notes):], names)

    def untuned(self, est) -> None:
        """Too few rows to tune: the same centre for every class's head; the per-class attributes
        and table say so."""
        k = self.n_classes
        t = est.tuning_
        table = {key: t[key] * k for key in ("learner", "alpha", "learning_rate", "risk", "stderr",
                                             "reliable", "effective_rows", "noise_energy",
                                             "pruned_at_row", "chosen")}
        table["capped"] = [bool(tel.get("capped")) for tel in est.telemetry_per_class_]
        table["on_sphere"] = [bool(tel.get("on_sphere")) for tel in est.telemetry_per_class_]
        table["class"] = [c.item() if hasattr(c, "item") else c for c in self.classes]
        est.tuning_ = dict(t, **table, heads=k)
        est.alpha_ = np.full(k, float(est.alpha_))
        est.learning_rate_ = np.full(k, float(est.learning_rate_))

    # -- the model file
    def write(self, est, fitted: dict, doc: dict, jsonable, state_arrays) -> None:
        """One row of coefficients, one intercept, its own hyper-parameters and one SGD state per
        head, and the label weights."""
        fitted["coef"] = jsonable(np.asarray(est.coef_, dtype=np.float64))
        fitted["intercept"] = jsonable(np.asarray(est.intercept_, dtype=np.float64))
        fitted["label_weights"] = jsonable(list(self.table))
        if self.class_weights is not None:
            fitted["class_weight"] = jsonable(list(self.class_weights))
            fitted["class_shares"] = jsonable(getattr(est, "class_shares_", None))
        fitted["telemetry_per_class"] = jsonable(list(est.telemetry_per_class_))
        # every head's own hyper-parameters ("auto" chooses them per class)
        fitted["head_configs"] = [{k: jsonable(getattr(c, k)) for k in PER_HEAD_FIELDS}
                                  for c in self.configs]
        doc["state"] = None
        doc["states"] = None if self.states is None else [state_arrays(st) for st in self.states]

    @classmethod
    def read(cls, fitted: dict, doc: dict, config: HeadConfig, classes, parse_float,
             head_state) -> OneVsRestHeads:
        heads = cls(classes=np.asarray(classes),
                    table=tuple(parse_float(w) for w in fitted["label_weights"]))
        if fitted.get("class_weight") is not None:
            heads.class_weights = tuple(parse_float(w) for w in fitted["class_weight"])
        heads.configs = heads.head_configs(config)
        if fitted.get("head_configs"):
            heads.configs = [dataclasses.replace(c, **{k: parse_float(v) for k, v in own.items()})
                             for c, own in zip(heads.configs, fitted["head_configs"], strict=True)]
        states = doc.get("states")
        heads.states = None if states is None else [head_state(st) for st in states]
        return heads

    # -- the classifier's prediction side (k classes)
    @staticmethod
    def theta_b(est) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(est.coef_, dtype=np.float64), np.asarray(est.intercept_, dtype=np.float64)

    @staticmethod
    def labels(u: np.ndarray, classes) -> np.ndarray:
        """The argmax over the heads' scores."""
        return np.asarray(classes)[np.argmax(u, axis=1)]

    @staticmethod
    def probabilities(est, u: np.ndarray) -> np.ndarray:
        """The heads' one-vs-rest probabilities (each head's as the binary model's), normalized
        to sum to 1 over the classes."""
        p = est._positive_probability(u)
        return p / p.sum(axis=1, keepdims=True)

    @staticmethod
    def accuracy(u, codes, sample_weight=None) -> float:
        """Accuracy of the argmax against class indices."""
        return float(np.average(np.argmax(u, axis=1) == codes, weights=sample_weight))

    @staticmethod
    def risk(loss: str, u, codes, sample_weight=None) -> float:
        """The one-vs-rest loss: the sum over the heads, the mean over rows."""
        from ..losses import derivative
        signs = np.where(np.asarray(codes)[:, None] == np.arange(u.shape[1]), 1.0, -1.0)
        values = np.sum(derivative(loss, 0, signs * u), axis=1)
        return float(np.mean(values if sample_weight is None else values * sample_weight))

    def encode(self, y) -> np.ndarray:
        return class_codes(np.asarray(y), list(self.classes))

    @staticmethod
    def per_head_telemetry(est) -> list:
        return list(est.telemetry_per_class_)

    def check_validation(self, meta: dict) -> None:
        from ._multiclass import check_validation_release
        check_validation_release(self, meta)

    @staticmethod
    def risk_estimate(est, plan, epsilon_y, class_weights=None):
        from ._multiclass import one_vs_rest_risk
        return one_vs_rest_risk(est, plan, epsilon_y, class_weights)

