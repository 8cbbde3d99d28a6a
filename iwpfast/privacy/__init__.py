"""Local differential privacy on the data holder's side: calibration, mechanisms, the release.

Everything here is NumPy/pyarrow (no Numba); the modules that touch pyarrow import it lazily.
"""
from .calibration import analytic_gaussian_delta, gaussian_noise_scale, label_keep_probability
from .mechanisms import (
                         GaussianFeatureMechanism,
                         GaussianTargetMechanism,
                         KaryRandomizedResponse,
                         RandomizedResponse,
                         kary_probabilities,
)
from .release import ReleaseResult, privatize, read_release_spec, release
from .scaling import RangeScaler, parse_ranges
from .spec import METADATA_KEY, Guarantee, ReleaseSpec
from .streams import Privatized, read_release, release_stream

__all__ = [
    "METADATA_KEY",
    "GaussianFeatureMechanism",
    "GaussianTargetMechanism",
    "Guarantee",
    "KaryRandomizedResponse",
    "Privatized",
    "RandomizedResponse",
    "RangeScaler",
    "ReleaseResult",
    "ReleaseSpec",
    "analytic_gaussian_delta",
    "gaussian_noise_scale",
    "kary_probabilities",
    "label_keep_probability",
    "parse_ranges",
    "privatize",
    "read_release",
    "read_release_spec",
    "release",
    "release_stream",
]
