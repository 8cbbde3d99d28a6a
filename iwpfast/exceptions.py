"""Exceptions and warnings shared by every layer of iwpfast.

Every error says what was wrong *and* how to fix it; the classes subclass the builtin
that a caller would naturally catch (``ValueError`` for bad input), so user code that does
not know iwpfast still handles them.

scikit-learn is not imported here (it is a development dependency only).  Where a scikit-learn
convention needs its own class -- ``sklearn.exceptions.NotFittedError`` for an estimator used
before ``fit``, ``DataConversionWarning`` for a column-vector ``y`` -- ``sklearn_compatible``
returns a subclass of both the iwpfast class and scikit-learn's, and only when scikit-learn is
already loaded in the process, so ``except sklearn.exceptions.NotFittedError`` works in code that
uses scikit-learn and costs nothing elsewhere.
"""
import sys
from typing import Any

_CREDENTIALS_IN_URI: Any = None


def redact_credentials(text: str) -> str:
    """``text`` without credentials written into URIs: ``scheme://KEY:SECRET@host/...`` loses its
    ``KEY:SECRET@``, and query options such as ``secret_key=...`` or ``access_key=...`` their
    values.  Every iwpfast error message, and every line the CLI prints, goes through it."""
    import re

    global _CREDENTIALS_IN_URI
    if _CREDENTIALS_IN_URI is None:
        _CREDENTIALS_IN_URI = (
            # through the authority's last "@" (a secret may hold an unescaped "@")
            re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)[^/\s'\"]*@"),
            re.compile(r"(\b(?:access_key|secret_key|session_token|password|token|sig|signature|"
                       r"x-amz-signature|x-amz-credential|x-amz-security-token)=)[^&\s'\"]+",
                       re.IGNORECASE))
    userinfo, query = _CREDENTIALS_IN_URI
    return query.sub(r"\1***", userinfo.sub(r"\1", text))


class IWPError(Exception):
    """Base class of all iwpfast errors (their text never shows credentials written in a URI)."""

    def __str__(self) -> str:
        return redact_credentials(super().__str__())


class InvalidInputError(IWPError, ValueError):
    """Bad data or a bad parameter; the message names the column/row/parameter and the fix."""


class BadDataError(InvalidInputError):
    """The data are at fault, not the parameters: a null or NaN where a value is needed, a value
    outside what was declared for it in some row, a truncated or corrupt file (the CLI exits 65,
    EX_DATAERR).  An ``InvalidInputError``, so ``except InvalidInputError`` catches it."""


class MissingInputError(InvalidInputError):
    """An input that does not exist: no file, folder, object or match of a glob where the data
    (or a model) were to be read (the CLI exits 66, EX_NOINPUT)."""


class OutputNotCreatedError(InvalidInputError):
    """An output cannot be created where it was asked for: its folder is missing or is a file,
    cannot be written, or lacks the space (the CLI exits 73, EX_CANTCREAT)."""


class ServiceUnavailableError(IWPError, ConnectionError):
    """A service the command needs cannot be reached: an object store's endpoint, a cluster's
    scheduler, Spark's workers without pyarrow (the CLI exits 69, EX_UNAVAILABLE).  Also a
    ``ConnectionError``."""


class TemporaryFailureError(IWPError, OSError):
    """A failure that may pass if the command is run again later: a timeout, a store that throttles
    (the CLI exits 75, EX_TEMPFAIL).  Also an ``OSError``."""


class InternalError(IWPError, RuntimeError):
    """A bug of iwpfast: a state its own code should never reach (the CLI exits 70, EX_SOFTWARE,
    with the traceback to report)."""


class Interrupted(KeyboardInterrupt):
    """The command was stopped by a signal (SIGINT, SIGTERM or SIGHUP): a ``KeyboardInterrupt``
    (every cleanup that handles Ctrl-C handles it), carrying the signal's number (the CLI exits
    128 + signum)."""

    def __init__(self, signum: int = 2):
        super().__init__(signum)
        self.signum = int(signum)


class ReleaseSpecError(IWPError, ValueError):
    """A release's metadata is missing, corrupt or contradicts the parameters given."""


class DivergenceError(IWPError, FloatingPointError):
    """A gradient or iterate became non-finite; the message gives the row and suggests a fix.

    ``config``: the HeadConfig of the head that diverged (set by the engine and its NumPy twin),
    so that a caller who knows more (whether the user chose the step, whether the data look
    unscaled) can give better advice (``iwpfast.sgd.state.divergence_advice``)."""

    config: object | None = None
    #: the message's first sentence (where it diverged), without the advice
    where: str | None = None
    #: the name of the head that diverged, when a scan trains several (``sgd.scan``)
    head: str | None = None
    #: every head of a fused unit whose theta is not finite after the stopping batch (``sgd.scan``)
    heads: list | None = None


class CheckpointError(IWPError, RuntimeError):
    """A checkpoint cannot be used to resume this run (other config or dataset, or corrupt)."""


class InvalidInputTypeError(InvalidInputError, TypeError):
    """Bad input of the wrong type (e.g. an object in a numeric matrix): also a ``TypeError``."""


class SampleWeightError(InvalidInputError):
    """A sample weight that is not finite and >= 0 (or does not fit the features' dtype) in a
    chunk: ``row`` is its row in the chunk and ``reason`` why it is refused, so that a caller who
    knows where the chunk came from (the streaming driver) can name the column and source row."""

    def __init__(self, message: str, row: int, reason: str):
        super().__init__(message)
        self.row = row
        self.reason = reason


class NotFittedError(IWPError, ValueError, AttributeError):
    """An estimator was used before ``fit`` (a ``ValueError`` and an ``AttributeError``, as
    scikit-learn's ``NotFittedError``)."""


class PrivacyLeakWarning(UserWarning):
    """A privacy parameter was derived from the private data itself, or privacy is otherwise weakened."""


class PrivacyCalibrationWarning(UserWarning):
    """The chosen noise calibration is outside the range where its proof holds."""


class NumericalWarning(UserWarning):
    """Estimator variance or stability problem (large exp(sigma^2 |theta|^2), pass ended on the sphere...)."""


class DataConversionWarning(UserWarning):
    """The input was converted to the form the estimator needs (e.g. a column-vector ``y``)."""


_SKLEARN_TWINS = {"NotFittedError": "NotFittedError", "DataConversionWarning": "DataConversionWarning"}
_twin_cache: dict = {}


def sklearn_compatible(cls: type) -> type:
    """``cls``, or -- when ``sklearn.exceptions`` is already imported -- a subclass of ``cls`` and of
    scikit-learn's class of the same name (same name, so messages and reprs do not change)."""
    mod = sys.modules.get("sklearn.exceptions")
    other = getattr(mod, _SKLEARN_TWINS.get(cls.__name__, ""), None) if mod is not None else None
    if other is None:
        return cls
    twin = _twin_cache.get(cls)
    if twin is None:
        twin = type(cls.__name__, (cls, other), {"__module__": cls.__module__,
                                                 "__qualname__": cls.__qualname__})
        _twin_cache[cls] = twin
    return twin


class UnitsWarning(UserWarning):
    """Data passed in units that do not look like the ones the call assumes (raw vs scaled)."""


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning issued by the caller point at the first frame
    outside the package (the user's line), however many of the package's frames lie between:
    a classifier's ``fit`` adds one of its own to the estimators' common one."""
    import os
    import sys
    import types
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    # the caller, which warnings.warn counts as level 1
    frame: types.FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level
