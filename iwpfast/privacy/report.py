"""What a release reports: its :class:`ReleaseResult`, and the warnings about the data it saw.

The counts are about the private data (rows dropped, clipped, out of range): the caller keeps them
to itself.  The runs test (``label_order_z``) warns when the label column looks sorted or
clustered, since row order is not protected by the noise.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from ..exceptions import PrivacyLeakWarning
from .randomness import NoiseKey
from .spec import ReleaseSpec


@dataclass
class ReleaseResult:
    """What a release did.  The counts are about the private data: keep them to yourself."""

    destination: Path | str | None   # a local Path, or the URI / display name of a remote one
    spec: ReleaseSpec
    rows_read: int = 0
    rows_written: int = 0
    rows_dropped: int = 0
    rows_clipped: int = 0  # feature vectors scaled down to the L2 bound
    values_out_of_range: dict = field(default_factory=dict)  # per feature: values clipped to the range
    targets_clipped: int = 0  # scaled targets clipped to +-target_bound
    targets_out_of_range: int = 0  # raw targets outside the declared target_range (clipped to it)
    elapsed_s: float = 0.0
    #: the binary labels' encoding seen ("01" or "pm1"; None: none seen): about the raw data, never
    #: written anywhere (multi-part releases compare their parts' in the releasing process)
    label_encoding: str | None = None

    @property
    def rows_per_s(self) -> float:
        return self.rows_read / self.elapsed_s if self.elapsed_s > 0 else float("nan")

    def summary(self) -> str:
        lines = [f"released {self.rows_written:,} rows"
                 + (f" to {self.destination}" if self.destination else "")
                 + f" in {self.elapsed_s:.2f} s ({self.rows_per_s / 1e6:.2f} M rows/s)"]
        if self.rows_dropped:
            what = "missing or non-finite values" + (
                " or a label outside the declared classes" if self.spec is not None
                and self.spec.classes is not None else "")
            lines.append(f"dropped {self.rows_dropped:,} rows with {what}")
        if self.rows_clipped:
            lines.append(f"clipped {self.rows_clipped:,} feature vectors to the L2 bound {self.spec.bound:g}")
        for name, count in self.values_out_of_range.items():
            if count:
                lo, hi = self.spec.ranges[name]
                lines.append(f"{count:,} values of {name} lay outside the declared range {lo:g}:{hi:g} "
                             "and were clipped to it")
        if self.targets_out_of_range:
            assert self.spec.target_range is not None   # targets out of range: a regression
            lo, hi = self.spec.target_range
            lines.append(f"{self.targets_out_of_range:,} targets lay outside the declared range "
                         f"{lo:g}:{hi:g} and were clipped to it")
        if self.targets_clipped:
            lines.append(f"clipped {self.targets_clipped:,} targets to +-{self.spec.target_bound:g}")
        return "\n".join(lines)


def is_seeded(seed) -> bool:
    if seed is None:
        return False
    return seed.seeded if isinstance(seed, NoiseKey) else True


def warn_seeded(stacklevel: int) -> None:
    warnings.warn(
        "seeded release: the noise is reproducible from the seed (and removable by whoever knows "
        "it); for simulations only -- a real release must use seed=None (fresh OS entropy). The "
        "file records \"seeded\": true (never the seed)",
        PrivacyLeakWarning, stacklevel=stacklevel)


def label_order_z(positives: int, rows: int, changes: int) -> float:
    """Runs test: z-score of the number of label changes against a uniformly random row order.

    For n1 positives among n rows in random order, E[changes] = 2 n1 n0 / n and
    Var = 2 n1 n0 (2 n1 n0 - n) / (n^2 (n - 1)) (Wald & Wolfowitz).  Very negative z: far fewer
    changes than chance, i.e. the labels are sorted or clustered.
    """
    n1, n = positives, rows
    n0 = n - n1
    if n < 3 or n1 == 0 or n0 == 0:
        return 0.0
    mean = 2.0 * n1 * n0 / n
    var = 2.0 * n1 * n0 * (2.0 * n1 * n0 - n) / (n * n * (n - 1.0))
    return (changes - mean) / math.sqrt(var) if var > 0 else 0.0


#: the runs test warns below this z (a false alarm on a random order: probability ~1e-9)
LABEL_ORDER_Z = -6.0


def finish_counts(result: ReleaseResult, privatizer) -> None:
    positives, rows, changes = privatizer.checker.label_runs
    z = label_order_z(positives, rows, changes)
    if z < LABEL_ORDER_Z:
        warnings.warn(
            f"the label column {result.spec.label!r} looks sorted or clustered in the row order "
            f"({changes:,} label changes between consecutive rows where a random order gives about "
            f"{2.0 * positives * (rows - positives) / rows:,.0f}; runs test z = {z:.1f}): the "
            "position of a row can reveal its label, which the noise does not protect. Release "
            "with shuffle=True (CLI: --shuffle)",
            PrivacyLeakWarning, stacklevel=5)
    if privatizer.label_encoding == "pm1" and result.spec.classes is None:
        warnings.warn(
            f"the label column {result.spec.label!r} holds -1/+1; a release records the binary "
            "classes by a fixed rule, never from the data: [0, 1] (-1 is the negative class), so a "
            "model fitted on it predicts 0/1. Declare classes=(-1, 1) (CLI: --classes -1 1) to "
            "have it predict -1/+1", UserWarning, stacklevel=5)
    result.label_encoding = privatizer.label_encoding
    result.rows_clipped = privatizer.rows_clipped
    result.targets_clipped = privatizer.targets_clipped
    result.targets_out_of_range = privatizer.checker.targets_out_of_range
    if result.targets_out_of_range:
        assert result.spec.target_range is not None   # targets out of range: a regression
        lo, hi = result.spec.target_range
        warnings.warn(
            f"{result.targets_out_of_range:,} regression targets lay outside the declared range "
            f"{lo:g}:{hi:g} and were clipped to it; widen --target-range if that is not intended",
            UserWarning, stacklevel=5)
    result.values_out_of_range = {k: v for k, v in privatizer.checker.out_of_range.items() if v}
    if result.values_out_of_range:
        detail = ", ".join(f"{k}: {v:,}" for k, v in result.values_out_of_range.items())
        warnings.warn(
            f"values outside the declared ranges were clipped to them ({detail}); "
            "widen the ranges if that is not intended",
            UserWarning,
            stacklevel=5,
        )
