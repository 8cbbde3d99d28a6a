"""The paper's experiments, reproduced by the library (``iwpfast experiment NAME``).

Example (a reduced run; the full ones are ``iwpfast experiment synthetic-p2`` and so on)::

    from iwpfast.experiments import run
    results = run("synthetic-p2", seeds=3, n_train=20_000, out_dir="results", plots=False)
    print(results[0]["table"])

Each run writes ``<out_dir>/<name>.json`` (setting, release parameters, per-head table and curves)
and, with ``plots=True``, ``<name>-<calibration>.png`` and (exponential loss) ``<name>-bias.png``.
"""
from __future__ import annotations

import json
import os
import platform
import time

import numpy as np

from .settings import GROUPS, SETTINGS, expand

__all__ = ["run", "SETTINGS", "GROUPS", "expand"]


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        return v if np.isfinite(v) else None
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def run(name: str, *, seeds: int | list[int] = 20, n_train: int | None = None,
        out_dir: str | os.PathLike | None = "iwpfast-results", engine: str | None = None,
        plots: bool = True, calibrations: tuple[str, ...] | None = None, progress=None,
        first_seed: int = 0, backend: str | None = None) -> list[dict]:
    """Run experiment ``name`` (a setting or a group: see ``SETTINGS``/``GROUPS``).

    seeds: how many (0, 1, ... shifted by ``first_seed``) or an explicit list. n_train: training rows
    (synthetic: rows drawn; ACS: the first rows of the 80% split; None = the paper's size).
    engine: "numba" (the kernels, default) or "numpy" (the reference twin); ``backend=`` is its
    deprecated name.  Returns one summary per setting, each with a Markdown ``table``; writes
    JSON/PNG under ``out_dir`` unless it is None.
    """
    from ..engines import engine_from_keywords

    engine = engine_from_keywords(engine, backend, "backend", default="numba",
                                  allowed=("numba", "numpy"))
    from .bias import bias_line
    from .common import format_table, run_setting, with_overrides

    seed_list = list(range(first_seed, first_seed + seeds)) if isinstance(seeds, int) else list(seeds)
    if not seed_list:
        from ..exceptions import InvalidInputError
        raise InvalidInputError("seeds must be >= 1 (or a non-empty list)")
    outputs = []
    from .multiclass import MULTICLASS_SETTINGS
    for setting_name in expand(name):
        if setting_name in MULTICLASS_SETTINGS:
            outputs.append(_run_multiclass(setting_name, seed_list, n_train, out_dir, plots, progress))
            continue
        setting = with_overrides(SETTINGS[setting_name],
                                 calibrations=tuple(calibrations) if calibrations else None)
        summary, raw = run_setting(setting, seed_list, n_train=n_train, engine=engine,
                                   progress=progress)
        if setting.loss == "exponential":
            summary["bias_line"] = bias_line(summary, raw[0])
        from .. import __version__
        summary["environment"] = {"iwpfast": __version__, "numpy": np.__version__,
                                  "python": platform.python_version(), "engine": engine,
                                  "machine": platform.machine(), "date": time.strftime("%Y-%m-%d")}
        summary["table"] = format_table(summary)
        if out_dir is not None:
            os.makedirs(out_dir, exist_ok=True)
            with open(os.path.join(out_dir, f"{setting_name}.json"), "w") as fh:
                json.dump(_jsonable(summary), fh, indent=1)
            if plots:
                from .plots import plot_bias, plot_curves
                for cal in summary["calibrations"]:
                    plot_curves(summary, cal, os.path.join(out_dir, f"{setting_name}-{cal}.png"))
                if "bias_line" in summary:
                    plot_bias(summary, summary["bias_line"],
                              os.path.join(out_dir, f"{setting_name}-bias.png"))
        outputs.append(summary)
    return outputs


def _run_multiclass(name, seeds, n_train, out_dir, plots, progress) -> dict:
    """One multiclass setting (``iwpfast.experiments.multiclass``): JSON, table, figure."""
    from .. import __version__
    from .multiclass import plot, run_multiclass
    summary = run_multiclass(name, seeds, n_train=n_train, progress=progress)
    summary["environment"] = {"iwpfast": __version__, "numpy": np.__version__,
                              "python": platform.python_version(), "machine": platform.machine(),
                              "date": time.strftime("%Y-%m-%d")}
    if out_dir is not None:
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, f"{name}.json"), "w") as fh:
            json.dump(_jsonable(summary), fh, indent=1)
        if plots:
            plot(summary, os.path.join(out_dir, f"{name}.png"))
    return summary
