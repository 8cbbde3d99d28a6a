"""The kernels' ABI (iwpfast/_kernels/abi.py) pinned: codes, packed-parameter positions, counter
and telemetry positions.  The compiled kernels, checkpoints written by earlier versions and the
NumPy twin all rely on these numbers; changing one is a format change, made here on purpose."""
import ast
import dataclasses
import pathlib

import numpy as np
import pytest

from iwpfast._kernels import abi
from iwpfast.losses import LOSSES
from iwpfast.sgd import state


def test_codes_are_pinned():
    assert abi.LOSS_CODES == {"exponential": 0, "quadratic": 1, "logistic": 2, "squared_error": 3}
    assert tuple(abi.LOSS_CODES) == LOSSES                    # every loss name has a code
    assert abi.MODE_CODES == {"clean": 0, "naive": 1, "iwp": 2}
    assert abi.SCHEDULE_CODES == {"constant": 0, "inverse": 1}
    assert abi.NO_DIVERGENCE == -1


def _compared_loss_codes(function: str) -> set[str]:
    """The ``LOSS_*`` names ``function`` of ``_kernels/sgd.py`` compares ``loss`` with."""
    source = pathlib.Path(abi.__file__).with_name("sgd.py").read_text()
    node = next(n for n in ast.walk(ast.parse(source))
                if isinstance(n, ast.FunctionDef) and n.name == function)
    return {c.id for n in ast.walk(node)
            if isinstance(n, ast.Compare) and isinstance(n.left, ast.Name) and n.left.id == "loss"
            for c in n.comparators if isinstance(c, ast.Name) and c.id.startswith("LOSS_")}


def test_the_kernels_loss_codes_are_its_branches():
    """``SGD_KERNEL_LOSS_CODES`` (what the engine lets into the kernel) is what the branches of
    ``_row_scalars`` and ``_table_row_scalars`` implement: a code listed without its branches, or
    a branch without its code listed, fails here."""
    codes = {name: getattr(abi, name) for name in dir(abi)
             if name.startswith("LOSS_") and isinstance(getattr(abi, name), int)}
    listed = {name for name, code in codes.items() if code in abi.SGD_KERNEL_LOSS_CODES}
    assert len(listed) == len(abi.SGD_KERNEL_LOSS_CODES)
    # _row_scalars: one branch per code, its final else the squared error
    assert _compared_loss_codes("_row_scalars") | {"LOSS_SQUARED_ERROR"} == listed
    # _table_row_scalars (one-vs-rest heads: classification only): its final else the logistic
    assert _compared_loss_codes("_table_row_scalars") | {"LOSS_LOGISTIC",
                                                         "LOSS_SQUARED_ERROR"} == listed
    assert set(abi.LOSS_CODES.values()) <= set(abi.SGD_KERNEL_LOSS_CODES)


def test_positions_are_pinned():
    assert abi.FPARAM_FIELDS == ("match_z", "alpha", "learning_rate", "mu", "radius",
                                 "variance_cap", "match_minus_z", "other_z", "other_minus_z")
    assert (abi.F_MATCH_Z, abi.F_LABEL_TILDE, abi.F_OTHER_MINUS_Z) == (0, 0, 8)
    assert abi.IPARAM_FIELDS == ("loss", "mode", "schedule", "truncation", "fit_intercept",
                                 "average_start", "trace_every", "batch_size", "weighted",
                                 "noise_law")
    assert (abi.I_LOSS, abi.I_BATCH_SIZE, abi.I_WEIGHTED, abi.I_NOISE_LAW) == (0, 7, 8, 9)
    assert abi.LAW_CODES == {"gaussian": 0, "laplace": 1}
    assert (abi.NOISE_VARIANCE_BLOCK, abi.NOISE_CURVATURE_BLOCK, abi.NOISE_GRID_BLOCK) == (0, 1, 2)
    assert abi.COUNTER_FIELDS == ("step", "n_avg", "carry_n", "trace_n")
    assert (abi.C_STEP, abi.C_NAVG, abi.C_CARRY, abi.C_TRACE) == (0, 1, 2, 3)
    assert abi.TELEMETRY_FIELDS == ("rows_seen", "batches", "projection_hits", "grad_norm_mean",
                                    "grad_norm_m2", "max_noise_energy", "cap_hits")
    assert [abi.TELEMETRY_INDEX[name] for name in abi.TELEMETRY_FIELDS] == list(range(7))
    assert (abi.T_ROWS, abi.T_PROJ, abi.T_ENERGY, abi.T_CAP) == (0, 2, 5, 6)


def test_one_definition_everywhere():
    # the Python side re-exports the ABI's tables; it does not define its own
    assert state.MODE_CODES is abi.MODE_CODES and state.SCHEDULE_CODES is abi.SCHEDULE_CODES
    assert state.TELEMETRY_FIELDS is abi.TELEMETRY_FIELDS
    assert state.TELEMETRY_INDEX is abi.TELEMETRY_INDEX
    from iwpfast.sgd import engine

    assert engine.LOSS_CODES is abi.LOSS_CODES
    assert engine.SGD_KERNEL_LOSS_CODES is abi.SGD_KERNEL_LOSS_CODES


def test_packing_by_name():
    fparams = abi.pack_fparams(match_z=1.5, alpha=0.1, learning_rate=0.01, mu=0.2, radius=3.0,
                               variance_cap=np.inf, match_minus_z=-0.5, other_z=1.5,
                               other_minus_z=-0.5)
    assert fparams.dtype == np.float64 and fparams[abi.F_RADIUS] == 3.0
    assert fparams[abi.F_LEARNING_RATE] == 0.01
    with pytest.raises(KeyError, match="missing.*other_minus_z"):
        abi.pack_fparams(match_z=1.0, alpha=0, learning_rate=1, mu=0, radius=1, variance_cap=1,
                         match_minus_z=0, other_z=1)
    iparams = abi.pack_iparams(loss=2, mode=1, schedule=0, truncation=3, fit_intercept=1,
                               average_start=-1, trace_every=0, batch_size=64, weighted=0,
                               noise_law=0)
    assert iparams.dtype == np.int64 and iparams[abi.I_TRUNCATION] == 3
    assert iparams[abi.I_BATCH_SIZE] == 64


def test_the_wrapper_packs_a_config_at_these_positions():
    from iwpfast.sgd.engine import _pack_config
    from iwpfast.sgd.state import HeadConfig, HeadState

    cfg = HeadConfig(loss="logistic", mode="iwp", n_features=2, noise_var=np.array([0.1, 0.2]),
                     label_keep_prob=0.75, truncation=3, batch_size=8, alpha=0.5,
                     learning_rate=0.02, radius=4.0, average_start=5, fit_intercept=True)
    fparams, iparams, noise_var, _ = _pack_config(cfg)
    assert fparams[abi.F_MATCH_Z] == pytest.approx(0.75 / 0.5)          # S~ = S / (2S - 1)
    assert fparams[abi.F_MATCH_MINUS_Z] == pytest.approx(1 - 1.5)
    assert (fparams[abi.F_ALPHA], fparams[abi.F_LEARNING_RATE], fparams[abi.F_RADIUS]) == (0.5, 0.02, 4.0)
    assert iparams[abi.I_LOSS] == abi.LOSS_LOGISTIC and iparams[abi.I_MODE] == abi.MODE_IWP
    assert (iparams[abi.I_TRUNCATION], iparams[abi.I_BATCH_SIZE], iparams[abi.I_AVERAGE_START]) == (3, 8, 5)
    assert iparams[abi.I_FIT_INTERCEPT] == 1 and iparams[abi.I_WEIGHTED] == 0
    assert _pack_config(dataclasses.replace(cfg, weighted=True))[1][abi.I_WEIGHTED] == 1
    np.testing.assert_array_equal(noise_var, [0.1, 0.2])
    st = HeadState.new(cfg)
    assert st.counters.shape == (len(abi.COUNTER_FIELDS),)
    assert st.telemetry.shape == (len(abi.TELEMETRY_FIELDS),)


def test_head_config_is_validated_once_for_both_implementations():
    # the kernel wrapper and the NumPy twin refuse the same config with the same message
    from iwpfast.exceptions import InvalidInputError
    from iwpfast.sgd.engine import run_chunk
    from iwpfast.sgd.reference import reference_run_chunk
    from iwpfast.sgd.state import HeadConfig, HeadState

    bad = [dict(truncation=-1), dict(truncation=41), dict(batch_size=0), dict(learning_rate=0.0),
           dict(noise_var=np.array([0.1, -1.0])), dict(label_keep_prob=0.4), dict(mode="other"),
           dict(schedule="paper"), dict(radius=-1.0)]
    X, y = np.zeros((2, 4)), np.ones(4)
    for overrides in bad:
        base = dict(loss="exponential", mode="iwp", n_features=2, noise_var=np.zeros(2))
        base.update(overrides)
        cfg = HeadConfig(**base)
        messages = []
        for run in (run_chunk, reference_run_chunk):
            with pytest.raises(InvalidInputError) as info:
                run(cfg, HeadState.new(HeadConfig(loss="exponential", mode="iwp", n_features=2,
                                                  noise_var=np.zeros(2))), X, y)
            messages.append(str(info.value))
        assert messages[0] == messages[1] and "HeadConfig." in messages[0], overrides


def test_each_noise_laws_inverse_is_the_one_its_law_object_runs():
    """A noise law's record names its inverse (``inverse``, a LAW_CODES key: what the planner
    reads); the learner runs the inverse of the law object the record's ``learner_law`` makes
    (checked and coded by ``sgd.state.check_config``): the two must agree."""
    from iwpfast.noise_registry import NOISE_LAW_RECORDS
    from iwpfast.registry import resolve

    p = 2
    for record in NOISE_LAW_RECORDS.values():
        assert record.inverse in abi.LAW_CODES, record.law
        law = None if record.learner_law is None else resolve(record.learner_law)(
            {"law": record.law, "grid": 2.0**-10, "scale": 0.5, "variance": 0.5}, p, None)
        variance = np.full(p, 0.5) if law is None else law.variance
        cap = np.inf if law is None else law.default_variance_cap()
        # the exponential loss: the one whose inverse is the law's own (its record's "product")
        cfg = state.HeadConfig(loss="exponential", mode="iwp", n_features=p, noise_var=variance,
                               noise_law=law, learning_rate=0.1, batch_size=8, variance_cap=cap)
        assert state.check_config(cfg).noise_law == abi.LAW_CODES[record.inverse], record.law
