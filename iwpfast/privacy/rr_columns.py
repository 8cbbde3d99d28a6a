"""Categorical columns released by k-ary randomized response (``categorical_mechanism="rr"``):
the spec's checks and mechanisms, the guarantee's and the metadata's words for them.

Each private categorical column is released as ONE integer code, the index of a category, by
k-ary randomized response at its own budget (``KaryRandomizedResponse``, the k-class label's
audited sampler); the numeric part keeps the feature mechanism at the numeric-only sensitivity.
``ReleaseSpec`` (spec.py) calls these; docs/release.md "Categorical columns by randomized
response" documents the format and the guarantee, docs/math.md the learner's exact inverse.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

from ..exceptions import InvalidInputError, ReleaseSpecError
from .feature_map import CATEGORICAL_MECHANISMS
from .mechanisms import KaryRandomizedResponse


def build_rr_mechanisms(categorical_mechanism, epsilon_categorical, categories: Mapping,
                        public_features) -> tuple[dict[str, KaryRandomizedResponse], object]:
    """({private categorical column: its KaryRandomizedResponse}, the budgets normalized to
    {column: epsilon} -- or None with 'gaussian'), checked with errors that name the fix."""
    if categorical_mechanism not in CATEGORICAL_MECHANISMS:
        raise InvalidInputError(
            f"categorical_mechanism must be one of {CATEGORICAL_MECHANISMS}, got "
            f"{categorical_mechanism!r} (CLI: --categorical-mechanism)")
    if categorical_mechanism == "gaussian":
        if epsilon_categorical is not None:
            raise InvalidInputError(
                "epsilon_categorical is the budget of categorical_mechanism='rr'; with the "
                "default 'gaussian' the one-hot blocks share epsilon_x: drop it, or set "
                "categorical_mechanism='rr' (CLI: --categorical-mechanism rr --epsilon-cat E)")
        return {}, None
    private = [c for c in categories if c not in public_features]
    eps = epsilon_categorical
    if eps is None:
        raise InvalidInputError(
            "categorical_mechanism='rr' needs epsilon_categorical, the budget of each private "
            "categorical column (e.g. epsilon_categorical=1.0; CLI: --epsilon-cat 1)")
    if isinstance(eps, Mapping):
        extra = [c for c in eps if c not in private]
        if extra:
            raise InvalidInputError(
                f"epsilon_categorical names {extra}, which are not private categorical columns "
                f"({private}); give one budget per private categorical column")
        missing = [c for c in private if c not in eps]
        if missing:
            raise InvalidInputError(
                f"epsilon_categorical gives no budget for the private categorical column(s) "
                f"{missing}; give one per column, or one number for all")
        budgets = {c: eps[c] for c in private}
    else:
        budgets = {c: eps for c in private}
    rr: dict[str, KaryRandomizedResponse] = {}
    for c, e in budgets.items():
        k = len(categories[c])
        if k < 2:
            raise InvalidInputError(
                f"column {c!r} declares {k} category: randomized response needs at least 2 "
                "(a column with one category says nothing; drop it)")
        rr[c] = KaryRandomizedResponse(e, k, parameter=f"epsilon_categorical[{c!r}]")
    return rr, {c: m.epsilon for c, m in rr.items()}


def check_numeric_part(rr: Mapping, features, private_numeric: int) -> None:
    """Randomized-response columns need a private numeric feature (not supported alone yet)."""
    if rr and features is not None and not private_numeric:
        raise InvalidInputError(
            "categorical_mechanism='rr' needs at least one private numeric feature (the "
            "numeric part keeps epsilon_x); a release of randomized-response categorical "
            "columns alone is not supported yet: add a private numeric feature, or use "
            "categorical_mechanism='gaussian'")


def guarantee_clause(rr: Mapping) -> str:
    """The guarantee statement's clause for the randomized-response columns."""
    return (", categorical column(s) " + ", ".join(
        f"{c} (k={m.n_classes}, epsilon={m.epsilon:g}: kept with probability "
        f"q={m.keep_probability:.4g}, each other category r={m.other_probability:.4g})"
        for c, m in rr.items())
        + " each by k-ary randomized response (one integer code per column), composed "
        "with the rest by basic composition")


def describe_how(rr: Mapping, column: str) -> str:
    """How ``iwpfast info`` says a categorical column is released."""
    m = rr.get(column)
    return "one-hot" if m is None else (
        f"one code by k-ary randomized response, epsilon={m.epsilon:g}, "
        f"q={m.keep_probability:.6g}, r={m.other_probability:.6g}")


def rr_metadata(rr: Mapping) -> dict:
    """The metadata fields of the randomized-response columns: per column k, its budget and the
    law's (q, r), which the learner's inverse reads (never a seed)."""
    if not rr:
        return {}
    return {"categorical_mechanism": "rr",
            "categorical_rr": {c: {"k": m.n_classes, "epsilon": m.epsilon,
                                   "keep_prob": m.keep_probability,
                                   "other_prob": m.other_probability}
                               for c, m in rr.items()}}


def rr_from_metadata(meta: Mapping) -> dict:
    """The spec's arguments for the randomized-response columns of a release's metadata."""
    stored = meta.get("categorical_rr")
    return {"categorical_mechanism": meta.get("categorical_mechanism") or "gaussian",
            "epsilon_categorical": ({c: v["epsilon"] for c, v in stored.items()} if stored
                                    else None)}


def check_rr_metadata(rr: Mapping, meta: Mapping) -> None:
    """The stored (k, q, r) of every column must be what its budget gives (an edited file is
    refused)."""
    for c, m in rr.items():
        stored = (meta.get("categorical_rr") or {}).get(c) or {}
        if int(stored.get("k", -1)) != m.n_classes or not all(
                math.isclose(float(stored.get(key, -1.0)), want, rel_tol=1e-12)
                for key, want in (("keep_prob", m.keep_probability),
                                  ("other_prob", m.other_probability))):
            raise ReleaseSpecError(
                f"release metadata is inconsistent: categorical_rr[{c!r}] {stored!r} does not "
                f"match k={m.n_classes}, epsilon={m.epsilon!r} recomputed; the file was edited "
                "or is corrupt")
