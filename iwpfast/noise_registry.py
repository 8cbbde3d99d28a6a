"""The noise laws of a release, one record each: the one table that the release, the planner, the
command line and the learner read (docs/extending.md "A noise law").

A record says how a spec selects the law (``mechanism`` and ``noise``), its name in the release
metadata (``law``), the release's sampler (a ``NoiseLaw`` class of ``iwpfast.privacy.noise_laws``)
and calibration, the words of its guarantee, its command-line choice, and what the learner
debiases it with: ``inverse`` (the key of the kernels' ``LAW_CODES``: "gaussian", the
inverse-Weierstrass transform that reads each feature's variance only, or a law of its own such
as "laplace"; what the planner reads) and ``learner_law`` (the law object that gives the learner
its tau, from the metadata's ``noise`` block; None when the variance is all it needs: the
learner's kernel runs the inverse that object names, ``sgd.state``).

What the learner asks of a law is the ``LearnerLaw`` protocol below (its variance, its tau,
its finite-variance cap, its kernel code, the losses it debiases): the learner never tests a
law's type nor a loss's name.  Which losses a law debiases, and how, is the record's
``supports`` table, registered once with the law (``support`` adds a loss to a law's table):
a law is added without touching any loss record, and a loss without touching any law unless
it wants a law's own inverse.

Pure Python and light (the command line reads it to list its choices): the release-side pieces
are named as ``"module:attribute"`` and imported when first used (``iwpfast.registry.resolve``);
a record made at run time may hold the objects themselves.  ``register`` adds a record,
``unregister`` removes it.

    >>> from iwpfast.noise_registry import law_record, noise_choices, mechanism_choices
    >>> law_record("gaussian", "float").law, noise_choices(), mechanism_choices()
    ('float_gaussian', ('discrete', 'float'), ('gaussian', 'laplace'))
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .exceptions import InvalidInputError, ReleaseSpecError
from .registry import check_refs, resolve  # noqa: F401 (resolve: the records' users import it here)

if TYPE_CHECKING:
    import numpy as np

#: the fields a record may fill with a ``"module:attribute"`` name of the piece
_PIECES = ("sampler", "calibrate", "guarantee_words", "noise_line", "learner_law")


@dataclass(frozen=True)
class NoiseLawRecord:
    """One noise law of the feature vector (see the module docstring).

    law:          the metadata's ``noise.law`` name (a contract: never renamed once released).
    mechanism:    ``ReleaseSpec.mechanism`` / ``--mechanism`` of the law ("gaussian": a variant of
                  the Gaussian mechanism, (epsilon, delta) and an L2 bound).
    noise:        ``ReleaseSpec.noise`` / ``--noise`` of the law within its mechanism.
    sampler:      the release's ``iwpfast.privacy.noise_laws.NoiseLaw`` subclass (or its name).
    calibrate:    ``(mech, dims, coord_bound, dtype) -> None``: sets ``mech.sigma`` and
                  ``mech.discrete`` of a Gaussian-type mechanism (``iwpfast.privacy.mechanisms``);
                  None for a mechanism of its own, whose feature mechanism calibrates itself.
    wording:      the law in a few words (``iwpfast plan``).
    guarantee_words: ``(spec, feature_mechanism) -> str``: the law's clause in the guarantee's
                  statement (``ReleaseSpec.guarantee``; ``iwpfast.privacy.spec_text``).
    noise_line:   ``feature_mechanism -> str``: the ``noise:`` line of ``ReleaseSpec.describe``.
    exact:        whether the guarantee holds for the values as written (the metadata's
                  ``guarantee.holds_for``); False for floating-point noise.
    help:         the command line's words for its ``--noise`` choice (``iwpfast release --help``).
    mechanism_help: the words for its ``--mechanism`` choice (read from a mechanism's first law).
    inverse:      the learner's inverse: a key of ``iwpfast._kernels.abi.LAW_CODES`` (the
                  planner's variance factor reads it; the learner runs the inverse of the law
                  object ``learner_law`` gives, tests/test_abi.py checks that the two agree).
    learner_law:  ``(noise_meta, p, noised) -> law | None``: the learner's law object (its tau) from
                  the metadata's ``noise`` block; None: the Gaussian inverse (variances only).
    norm:         the norm of the feature bound ("L2", or "L1" for Laplace).
    default_delta: the feature delta when none is given (0.0: pure epsilon).
    supports:     loss name -> how the learner debiases it under this law: "variance" (the
                  Gaussian formula with s_j = the law's variance: exact for every loss under a
                  Gaussian law, for a parabola under any law) or "product" (the law's own
                  inverse, ``LearnerLaw.exponential_factor``: exact for f = exp(-v)); a loss not
                  in it is refused with ``refusal``.  None: every loss, by "variance" (a law
                  whose ``inverse`` is "gaussian").  ``support`` adds a loss to it.
    refusal:      the words refusing a loss the law does not debias (``{loss}``: its name).
    """

    law: str
    mechanism: str
    noise: str
    sampler: Any
    calibrate: Any
    wording: str
    guarantee_words: Any
    noise_line: Any
    exact: bool = True
    help: str = ""
    mechanism_help: str = ""
    inverse: str = "gaussian"
    learner_law: Any = None
    norm: str = "L2"
    default_delta: float = 1e-5
    supports: Mapping[str, str] | None = None
    refusal: str = "loss={loss!r} has no unbiased correction for this noise law in iwpfast"
    #: the table ``support`` extends (a copy of ``supports``, made when the record is made)
    _table: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.supports is not None:
            bad = {k: v for k, v in self.supports.items() if v not in INVERSE_FORMS}
            if bad:
                raise InvalidInputError(f"noise law {self.law!r}: supports={bad!r}; each loss's "
                                        f"form must be one of {INVERSE_FORMS}")
            self._table.update(self.supports)

    def inverse_for(self, loss: str) -> str | None:
        """How the learner debiases ``loss`` under this law ("variance", "product"), or None."""
        return "variance" if self.supports is None else self._table.get(loss)


#: how a loss is debiased under a law (``NoiseLawRecord.supports``)
INVERSE_FORMS = ("variance", "product")


@runtime_checkable
class LearnerLaw(Protocol):
    """What a noise law gives the learner: the one interface of its law objects
    (``iwpfast.laplace``: ``GaussianLaw``, variances only, and ``DiscreteLaplace``).  The
    learner (``estimates.noise_tau``, ``sgd.state.check_config``, the NumPy twin, the
    estimators' cap) asks the law; it never tests its type.

    inverse:     the kernels' key of its own inverse (``iwpfast._kernels.abi.LAW_CODES``; a law's
                 record names the same, ``tests/test_abi.py``).
    variance:    (p,) exact variance of each feature's noise (the "variance" form's s_j).
    broadcast:   the law of p features.
    inverse_for: how ``loss`` is debiased ("variance", "product") or None (refused by
                 ``refusal(loss)``): the record's ``supports`` table.
    exponential_factor: its own ("product") inverse at theta: per coordinate (log kappa_j,
                 -d log kappa_j / d theta_j); tau = -sum_j log kappa_j.
    default_variance_cap, check_cap: the cap on sum_j Var_j theta_j^2 that keeps a "product"
                 head inside the law's finite-variance region (inf, and no check, for Gaussian).
    kernel_noise: the noise array the kernel reads with its own inverse (``_kernels/abi.py``).
    """

    @property
    def inverse(self) -> str: ...

    @property
    def variance(self) -> np.ndarray: ...

    def broadcast(self, p: int) -> LearnerLaw: ...

    def inverse_for(self, loss: str) -> str | None: ...

    def refusal(self, loss: str) -> str: ...

    def exponential_factor(self, theta) -> tuple[np.ndarray, np.ndarray]: ...

    def default_variance_cap(self) -> float: ...

    def check_cap(self, variance_cap: float, name: str = "variance_cap") -> None: ...

    def kernel_noise(self) -> np.ndarray: ...


#: metadata law name -> record, in the order of the command line's choices
NOISE_LAW_RECORDS: dict[str, NoiseLawRecord] = {}


def register(record: NoiseLawRecord) -> NoiseLawRecord:
    """Add a law; its ``law`` name and its (mechanism, noise) pair must both be new, and a piece
    it names by a string must be named as ``"module:attribute"``."""
    check_refs(record, _PIECES, f"noise law {record.law!r}")
    if record.law in NOISE_LAW_RECORDS:
        raise InvalidInputError(f"a noise law named {record.law!r} is already registered")
    if any((r.mechanism, r.noise) == (record.mechanism, record.noise)
           for r in NOISE_LAW_RECORDS.values()):
        raise InvalidInputError(f"mechanism={record.mechanism!r} with noise={record.noise!r} already "
                                "selects a registered noise law")
    NOISE_LAW_RECORDS[record.law] = record
    return record


def unregister(law: str) -> None:
    """Remove the law named ``law`` (a test's toy law; the built-in laws are a contract)."""
    NOISE_LAW_RECORDS.pop(law, None)


def support(law: str, loss: str, form: str) -> None:
    """Let the law named ``law`` debias ``loss`` by ``form`` ("variance": exact for a parabola;
    "product": the law's own inverse, exact for f = exp(-v)): a new loss under a law with a
    table (docs/extending.md "A loss").  ``unsupport`` removes it."""
    record = record_of_law(law)
    if form not in INVERSE_FORMS:
        raise InvalidInputError(f"form={form!r} must be one of {INVERSE_FORMS}")
    if record.supports is None:
        raise InvalidInputError(f"noise law {law!r} debiases every loss by its variance already")
    record._table[loss] = form


def unsupport(loss: str) -> None:
    """Forget ``loss`` in every law's table (``losses.unregister_loss`` calls it)."""
    for record in NOISE_LAW_RECORDS.values():
        record._table.pop(loss, None)


def noise_choices() -> tuple[str, ...]:
    """The values of ``noise=`` / ``--noise``."""
    return tuple(dict.fromkeys(r.noise for r in NOISE_LAW_RECORDS.values()))


def mechanism_choices() -> tuple[str, ...]:
    """The values of ``mechanism=`` / ``--mechanism``."""
    return tuple(dict.fromkeys(r.mechanism for r in NOISE_LAW_RECORDS.values()))


def mechanism_help() -> str:
    """The ``--mechanism`` choices in words."""
    return " or ".join(mechanism_record(m).mechanism_help or m for m in mechanism_choices())


def noise_help() -> str:
    """The ``--noise`` choices in words."""
    words = {r.noise: r.help for r in NOISE_LAW_RECORDS.values() if r.help}
    return " or ".join(words.get(n, n) for n in noise_choices())


def mechanism_record(mechanism: str) -> NoiseLawRecord:
    """The first law of ``mechanism`` (what its norm, default delta and wording come from)."""
    for record in NOISE_LAW_RECORDS.values():
        if record.mechanism == mechanism:
            return record
    raise InvalidInputError(f"mechanism must be one of {mechanism_choices()}, got {mechanism!r}")


def law_record(mechanism: str, noise: str) -> NoiseLawRecord:
    """The law a spec selects; ``InvalidInputError`` naming the legal pairs otherwise."""
    for record in NOISE_LAW_RECORDS.values():
        if record.mechanism == mechanism and record.noise == noise:
            return record
    pairs = ", ".join(f"{r.mechanism}/{r.noise}" for r in NOISE_LAW_RECORDS.values())
    raise InvalidInputError(f"no noise law for mechanism={mechanism!r} with noise={noise!r}; the "
                            f"registered ones (mechanism/noise) are {pairs}")


def record_of_law(law: str) -> NoiseLawRecord:
    """The record of a metadata law name; ``ReleaseSpecError`` for a name this iwpfast lacks."""
    record = NOISE_LAW_RECORDS.get(law)
    if record is None:
        raise ReleaseSpecError(f"release metadata names an unknown noise law {law!r}; upgrade iwpfast")
    return record


for _record in (
    NoiseLawRecord(
        law="discrete_gaussian", mechanism="gaussian", noise="discrete",
        sampler="iwpfast.privacy.noise_laws:DiscreteGaussianLaw",
        calibrate="iwpfast.privacy.mechanisms:calibrate_discrete_gaussian",
        wording="exact discrete Gaussian noise on a power-of-two grid from an AES-CTR keystream",
        guarantee_words="iwpfast.privacy.spec_text:discrete_gaussian_words",
        noise_line="iwpfast.privacy.spec_text:discrete_gaussian_noise_line",
        help="discrete (default: exact discrete Gaussian on a power-of-two grid from an AES-CTR "
             "keystream; the printed guarantee holds for the bits written)",
        mechanism_help="gaussian (default; (epsilon, delta), L2 bound)"),
    NoiseLawRecord(
        law="float_gaussian", mechanism="gaussian", noise="float",
        sampler="iwpfast.privacy.noise_laws:FloatGaussianLaw",
        calibrate="iwpfast.privacy.mechanisms:calibrate_float_gaussian",
        wording="floating-point Gaussian noise (SFC64)",
        guarantee_words="iwpfast.privacy.spec_text:float_gaussian_words",
        noise_line="iwpfast.privacy.spec_text:float_gaussian_noise_line", exact=False,
        help="float (floating-point Gaussian, the paper's; its guarantee holds for real-valued "
             "noise only, the float implementation leaks low-order bits)"),
    NoiseLawRecord(
        law="discrete_laplace", mechanism="laplace", noise="discrete",
        sampler="iwpfast.privacy.noise_laws:DiscreteLaplaceLaw", calibrate=None,
        wording="discrete Laplace mechanism",
        guarantee_words="iwpfast.privacy.spec_text:laplace_words",
        noise_line="iwpfast.privacy.spec_text:laplace_noise_line",
        mechanism_help="laplace (pure epsilon, delta 0: L1 bound, exact discrete Laplace noise on "
                       "a grid)",
        inverse="laplace", learner_law="iwpfast.laplace:law_from_metadata", norm="L1",
        default_delta=0.0,
        # D_j f = f - (Var_j theta_j^2 / 2) f'' for a parabola; D_1...D_p e^{-u} = e^{-u} prod kappa_j
        supports={"exponential": "product", "quadratic": "variance", "squared_error": "variance"},
        refusal="loss={loss!r} has no unbiased correction for a Laplace release in iwpfast: its "
                "exact inverse needs 3^p evaluations of the loss per row, and the practical "
                "polynomial form a p x p update per row; use loss='exponential' or "
                "loss='quadratic' (exact), or a Gaussian release"),
):
    register(_record)
