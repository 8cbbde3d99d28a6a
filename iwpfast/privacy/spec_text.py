"""What a ``ReleaseSpec`` says in words: its guarantee (``Guarantee``: epsilon, delta and the
one-line statement) with the metadata's guarantee fields, and its description (``iwpfast info``).

Functions of the spec (``ReleaseSpec.guarantee``, ``.describe`` and ``._guarantee_metadata``
delegate here), kept apart from its checks and metadata (spec.py).
"""
from __future__ import annotations

import math
from typing import NamedTuple

from ..noise_registry import law_record, resolve
from .mechanisms import KaryRandomizedResponse
from .rr_columns import describe_how, guarantee_clause


def _record(spec):
    """The spec's noise law (``iwpfast.noise_registry``): its words are below, one pair a law."""
    return law_record(spec.mechanism, spec.noise)


# --- each law's words: the guarantee's clause (spec, feature mechanism) and the `iwpfast info`
# noise line (feature mechanism); named by the laws' records
def laplace_words(spec, mech) -> str:
    return (f"the discrete Laplace mechanism on the grid 2^{round(math.log2(mech.grid))} "
            f"(pure epsilon_x={spec.epsilon_x:g}, delta=0; L1 bound {spec.bound:g}"
            f"{_blocks_text(spec)}, scale "
            f"b={mech.law.scale:.4g}: the snapped vector is clipped in integers, the sampler "
            "is exact integer arithmetic on an AES-CTR keystream, nothing is approximated)")


def discrete_gaussian_words(spec, mech) -> str:
    return (f"the discrete Gaussian mechanism on the grid 2^{mech.discrete.grid_log2} "
            f"(epsilon_x={spec.epsilon_x:g}, delta={spec.delta:g}, {spec.calibration} "
            f"calibration, L2 bound {spec.bound:g}{_blocks_text(spec)}, "
            f"sigma={spec.sigma:.4g}; a proven bound "
            "for the values as written: snapping, sampler and tail are in delta, the noise "
            "comes from an AES-CTR keystream)")


def float_gaussian_words(spec, mech) -> str:
    return (f"the Gaussian mechanism with floating-point noise (epsilon_x={spec.epsilon_x:g}, "
            f"delta={spec.delta:g}, {spec.calibration} calibration, L2 bound "
            f"{spec.bound:g}{_blocks_text(spec)}, "
            f"sigma={spec.sigma:.4g}) -- this holds for real-valued noise only: the "
            "floating-point implementation leaks low-order bits of the data, so the values "
            "as written do NOT carry this guarantee (use noise='discrete')")


def laplace_noise_line(mech) -> str:
    return (f"noise:         discrete_laplace on the grid 2^{round(math.log2(mech.grid))} "
            f"(scale b {mech.law.scale:.6g}, variance {mech.variance:.6g}; pure epsilon, "
            "exact sampler, AES-CTR keystream)")


def float_gaussian_noise_line(mech) -> str:
    return (f"noise:         {mech.law} (floating point, SFC64; variance {mech.variance:.6g}; "
            "leaks low-order bits)")


def discrete_gaussian_noise_line(mech) -> str:
    law = mech.discrete
    return (f"noise:         discrete_gaussian on the grid 2^{law.grid_log2} (variance "
            f"{law.variance:.6g}; delta terms: Gaussian {law.terms.gaussian:.3g}, sampler edge "
            f"{law.terms.sampler_edge:.2g}, Gaussian tail {law.terms.gaussian_tail:.2g}; "
            f"AES-CTR keystream)")


class Guarantee(NamedTuple):
    """Per-record local-DP guarantee of a release and a one-line statement of it."""

    epsilon: float
    delta: float
    statement: str

    def __str__(self) -> str:
        return self.statement


def guarantee_metadata(spec, g: Guarantee) -> dict:
    """The guarantee as programs read it: epsilon and delta, and ``holds_for`` (with a
    ``caveat`` where the bits written do not carry it): "values_as_written" for the discrete
    law; "real_valued_noise_only" for float noise, whose low-order bits leak the data (the spec's
    own law says which: its record's ``exact``)."""
    # public columns: the guarantee is for records that agree on them (docs/release.md)
    public = {"not_protected": list(spec.public_features)} if spec.public_features else {}
    if _record(spec).exact:
        return {"epsilon": g.epsilon, "delta": g.delta, "holds_for": "values_as_written",
                **public}
    return {"epsilon": g.epsilon, "delta": g.delta, "holds_for": "real_valued_noise_only",
            **public,
            "caveat": "floating-point noise: the low-order bits of the values as written leak "
                      "the data, so they do NOT carry this (epsilon, delta); release with "
                      "noise='discrete' for a guarantee on the bits"}


def _blocks_text(spec) -> str:
    blocks, _ = spec._onehot_structure()
    if not blocks:
        return ""
    mech = spec._features_mech
    sens = "" if mech is None else f", sensitivity {mech.sensitivity:.4g}"
    return (f" on the numeric part and {blocks} one-hot block(s) of norm 1"
            f" ({'L1 2B + 2m' if _record(spec).norm == 'L1' else 'L2 sqrt(4B^2 + 2m)'}{sens})")


def spec_guarantee(spec) -> Guarantee:
    """Per-record ``(epsilon, delta)``-LDP by basic composition, with a one-line statement.

    With public columns the guarantee is for the private columns and the label: it holds for
    any two records that agree on the public columns (docs/release.md "Public columns"); the
    statement names the public columns as not protected."""
    mech = spec._features_mech
    eps = (spec.epsilon_x or 0.0) + math.fsum(m.epsilon for m in spec._rr_mechs.values()) \
        + (spec.epsilon_y or 0.0)
    delta = (spec.delta or 0.0 if mech is not None else 0.0) + (
        spec.delta_y or 0.0 if spec.task == "regression" else 0.0)
    public = spec.public_features
    if mech is None:
        head = (f"Each record's label is ({eps:g}, {delta:g})-locally differentially private "
                "for any two records with the same features (label-only release)")
    elif public:
        head = (f"Each record is ({eps:g}, {delta:g})-locally differentially private in its "
                "private columns and label, for any two records that agree on the public "
                "columns")
    else:
        head = f"Each record is ({eps:g}, {delta:g})-locally differentially private"
    if delta == 0 and mech is not None:
        head += " (pure epsilon)"
    private = spec.private_features if spec.features else ()
    names = ("features " + ", ".join(private) if private else "the features") if not public \
        else "private features " + (", ".join(private) if private else "(named at release)")
    if mech is None:
        law = ""
    else:
        law = resolve(_record(spec).guarantee_words)(spec, mech)
    if spec._rr_mechs:
        numeric = [f for f in private if not spec._is_rr(f)]
        names = (("features " if not public else "private features ") + ", ".join(numeric)
                 if numeric else "the numeric features")
    parts = [f"{head}: {names} by {law}" if mech is not None else f"{head}:"]
    if spec._rr_mechs:
        parts.append(guarantee_clause(spec._rr_mechs))
    label = spec.label or "(the label column)"
    if spec.label is None and spec._label_mech is None:
        parts.append("; no label released")
    elif spec._label_mech is None:
        parts.append(f"; label {label} released WITHOUT noise (public labels, not protected)")
    elif isinstance(spec._label_mech, KaryRandomizedResponse):
        parts.append(
            f", label {label} ({len(spec.classes or ())} classes) by k-ary randomized response "
            f"(epsilon_y={spec.epsilon_y:g}: kept with probability q={spec.label_keep_prob:.4g}, "
            f"each other class reported with probability r={spec.label_other_prob:.4g})"
        )
    elif spec.task == "classification":
        parts.append(
            f", label {label} by randomized response (epsilon_y={spec.epsilon_y:g}, "
            f"kept with probability {spec.label_keep_prob:.4g})"
        )
    else:
        parts.append(
            f", target {label} by the Gaussian mechanism (epsilon_y={spec.epsilon_y:g}, "
            f"delta_y={spec.delta_y:g}, bound {spec.target_bound:g}, sigma={spec.target_noise_scale:.4g})"
        )
    if public:
        parts.append(
            f"; {'features' if mech is None else 'public features'} {', '.join(public)} "
            "released WITHOUT noise (scaled by their declared ranges and clipped to them): NOT "
            "protected, the guarantee says nothing about what they reveal")
    if spec.ranges_from_data:
        parts.append("; WARNING: the feature ranges were computed from the data and are not protected")
    if spec.categories_from_data:
        parts.append(f"; WARNING: the categories of {', '.join(spec.categories_from_data)} were "
                     "read from the data and are not protected")
    if spec.seeded:
        parts.append("; WARNING: seeded release (simulations only): whoever knows the seed can "
                     "regenerate and remove the noise")
    text = "".join(parts) + "."
    if mech is None:  # no features' clause: the label's opens the sentence
        text = text.replace(":, label", ": label", 1).replace(":, target", ": target", 1)
    return Guarantee(eps, delta, text)


def _noise_line(spec) -> str:
    mech = spec._features_mech
    if mech is None:
        return "noise:         none on the features (every feature public: label-only release)"
    return resolve(_record(spec).noise_line)(mech)


def describe_spec(spec) -> str:
    """Multi-line human-readable description (used by ``iwpfast info``)."""
    lines = [
        f"task:          {spec.task}",
        f"features:      {', '.join(spec.features or ())}",
        # in feature order (the order the columns were released in), not the dict's
        "ranges:        " + ", ".join(f"{k}={spec.ranges[k][0]:g}:{spec.ranges[k][1]:g}"
                                     for k in (spec.features or spec.ranges) if k in spec.ranges),
        f"label:         {spec.label}",
    ]
    for f in spec.features or ():
        if f in spec.categories:
            cats = spec.categories[f]
            shown = ", ".join(map(str, cats[:12])) + (" ..." if len(cats) > 12 else "")
            catch = spec._unknown().get(f)
            lines.append(f"categorical:   {f}: {len(cats)} categories, "
                         f"{describe_how(spec._rr_mechs, f)} ({shown})"
                         + (f"; unknown values -> {catch}" if catch is not None else "")
                         + ("; categories read from the data: NOT protected"
                            if f in spec.categories_from_data else ""))
    if spec.public_features:
        lines.append(f"public:        {', '.join(spec.public_features)} (released without noise, "
                     "scaled by their ranges and clipped to them: NOT protected)")
    mech = spec._features_mech
    if mech is not None:
        per = "per private feature" if spec.public_features else "per feature"
        laplace = _record(spec).norm == "L1"
        blocks, _ = spec._onehot_structure()
        lines.append(f"feature bound: {spec.bound:g} ({'L1' if laplace else 'L2'}"
                     + (", over the private numeric features" if blocks else
                        ", over the private features" if spec.public_features else "")
                     + (f"; {blocks} private one-hot block(s): sensitivity "
                        + (f"2B + 2m = {mech.sensitivity:.6g} (L1)" if laplace else
                           f"sqrt(4B^2 + 2m) = {mech.sensitivity:.6g}") if blocks else "")
                     + ")")
        if laplace:
            # no Gaussian calibration and no sigma parameter: the law's own standard deviation
            lines.append(f"noise sd:      {spec.sigma:.6g} {per} (pure epsilon_x="
                         f"{spec.epsilon_x:g}, delta=0; discrete Laplace)")
        else:
            lines += [f"calibration:   {spec.calibration}",
                      f"sigma:         {spec.sigma:.6g} {per} (epsilon_x={spec.epsilon_x:g}, "
                      f"delta={spec.delta:g})"]
    if spec.public_features and spec.features:
        lines.append("noise var:     " + ", ".join(
            f"{f}={v:.6g}" for f, v in zip(spec.released_features,
                                           spec.feature_noise_variances(), strict=True)))
    lines += [_noise_line(spec), f"feature dtype: {spec.feature_dtype}"]
    if spec.classes is not None:
        lines.append(f"classes:       {len(spec.classes)}: " + ", ".join(map(repr, spec.classes))
                     + (" (written as their index 0..k-1)" if len(spec.classes) > 2
                        else " (written as -1, +1)"))
    if isinstance(spec._label_mech, KaryRandomizedResponse):
        lines.append(f"label noise:   k-ary randomized response, epsilon_y={spec.epsilon_y:g}, "
                     f"keep probability q={spec.label_keep_prob:.6g}, each other class "
                     f"r={spec.label_other_prob:.6g}")
    elif spec.label_keep_prob is not None:
        lines.append(f"label noise:   randomized response, epsilon_y={spec.epsilon_y:g}, "
                     f"keep probability {spec.label_keep_prob:.6g}")
    elif spec.target_noise_scale is not None:
        lines.append(f"target noise:  sigma_y={spec.target_noise_scale:.6g} "
                     f"(epsilon_y={spec.epsilon_y:g}, "
                     f"delta_y={spec.delta_y:g}, bound {spec.target_bound:g}, range {spec.target_range})")
    elif spec.label is not None:
        lines.append("label noise:   none (public labels)")
    if spec.row_count is not None:
        lines.append(f"rows:          {spec.row_count:,}")
    seeded = ("yes (simulation: the noise is reproducible from the seed)" if spec.seeded
              else "no (fresh OS entropy)")
    lines.append(f"seeded:        {seeded}")
    lines.append(f"guarantee:     {spec_guarantee(spec).statement}")
    return "\n".join(lines)
