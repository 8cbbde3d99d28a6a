"""Exceptions and warnings shared by every layer of iwpfast.

Every error says what was wrong *and* how to fix it; the classes subclass the builtin
that a caller would naturally catch (``ValueError`` for bad input), so user code that does
not know iwpfast still handles them.
"""


class IWPError(Exception):
    """Base class of all iwpfast errors."""


class InvalidInputError(IWPError, ValueError):
    """Bad data or a bad parameter; the message names the column/row/parameter and the fix."""


class ReleaseSpecError(IWPError, ValueError):
    """A release's metadata is missing, corrupt or contradicts the parameters given."""


class DivergenceError(IWPError, FloatingPointError):
    """A gradient or iterate became non-finite; the message gives the row and suggests a fix."""


class CheckpointError(IWPError, RuntimeError):
    """A checkpoint cannot be used to resume this run (other config or dataset, or corrupt)."""


class NotFittedError(IWPError, AttributeError):
    """An estimator was used before ``fit``."""


class PrivacyLeakWarning(UserWarning):
    """A privacy parameter was derived from the private data itself, or privacy is otherwise weakened."""


class PrivacyCalibrationWarning(UserWarning):
    """The chosen noise calibration is outside the range where its proof holds."""


class NumericalWarning(UserWarning):
    """Estimator variance or stability problem (large exp(sigma^2 |theta|^2), pass ended on the sphere...)."""


class UnitsWarning(UserWarning):
    """Data passed in units that do not look like the ones the call assumes (raw vs scaled)."""
