"""This tree's SGD kernel against another checkout's, in one process, timed alternately.

    python bench/kernel_ab.py OTHER_CHECKOUT [--rows 4000000] [--repeats 21] [--p 2,10,100]
                              [--losses exponential,logistic] [--batch 128] [--clock cpu]

Two processes run on a shared machine see different loads; here both kernel versions are loaded
in one process (the other checkout's ``iwpfast/_kernels`` is copied into a temporary package:
the kernels import only each other) and each pass of one is followed by a pass of the other (the
order flips every round), so a change of load hits both.  Every pass is ``sgd_chunk`` over the
same feature-major array with the configs of ``bench/kernels.py`` (mode iwp, public labels),
unweighted (``--label-keep-prob``: private labels instead); the two versions must give the same
theta bit for bit (checked).  Prints M rows/s
(medians) and the ratio this / other.  Used for the sample-weight change (bench/README.md).

``--heads N`` times ``sgd_chunk_heads`` instead: N heads of those configs in one scan, each with
its own alpha and learning rate (a grid like ``'auto'``'s), packed by this tree's engine; the
arguments a version does not take are left out (found by name, as for ``sgd_chunk``).
"""
from __future__ import annotations

import importlib
import inspect
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.dirname(_HERE)]     # bench/ and the repository root

from kernels import config, kernel_bench_parser, kernel_cases, make_data  # noqa: E402

from iwpfast.sgd.engine import (  # noqa: E402
    _LIKE,
    _carry_addresses,
    _kernel_config,
    _pack_heads,
    _table_form,
)
from iwpfast.sgd.state import HeadState  # noqa: E402


def load_other(checkout: str):
    """(sgd module, number of iparams fields) of another checkout's kernels."""
    source = os.path.join(checkout, "iwpfast", "_kernels")
    if not os.path.isfile(os.path.join(source, "sgd.py")):
        raise SystemExit(f"{checkout!r} has no iwpfast/_kernels/sgd.py")
    folder = tempfile.mkdtemp(prefix="iwpfast-kernel-ab-")
    shutil.copytree(source, os.path.join(folder, "other_kernels"))
    sys.path.insert(0, folder)
    sgd = importlib.import_module("other_kernels.sgd")
    abi = importlib.import_module("other_kernels.abi")
    return sgd, len(abi.IPARAM_FIELDS)


def one_pass(sgd, n_iparams, cfg, X, y, clock):
    fparams, iparams, noise_var, eulerian = _kernel_config(cfg)
    iparams = np.ascontiguousarray(iparams[:n_iparams])     # an older ABI reads the first fields
    st = HeadState.new(cfg)
    addresses = X.ctypes.data + np.arange(X.shape[0], dtype=np.int64) * X.strides[0]
    if eulerian is None and cfg.loss == "logistic":
        raise SystemExit("no Eulerian table for a logistic head")
    values = dict(
        addresses=addresses, like=_LIKE[X.dtype], y_address=np.int64(y.ctypes.data),
        y_like=_LIKE[y.dtype], n_rows=np.int64(y.shape[0]), carry_addresses=_carry_addresses(st),
        carry_like=_LIKE[np.dtype(np.float64)], fparams=fparams, iparams=iparams,
        noise_var=noise_var, theta=st.theta, theta_avg=st.theta_avg,
        intercept=st.intercept, intercept_avg=st.intercept_avg, carry_X=st.carry_X,
        carry_y=st.carry_y, counters=st.counters, telemetry=st.telemetry, trace=st.trace,
        trace_steps=st.trace_steps, table_form=_table_form(fparams), final=False,
        # older kernels read a (1, 1) table for the losses other than logistic
        eulerian=eulerian if eulerian is not None or _takes_none_eulerian(sgd) else np.zeros((2, 1)))
    # the arguments by name: sgd_chunk's signature differs between versions (issue 10 dropped
    # carry_addresses / carry_like and added table_form / final)
    kernel = getattr(sgd.sgd_chunk, "py_func", sgd.sgd_chunk)
    args = [values[name] for name in inspect.signature(kernel).parameters]
    start = clock()
    sgd.sgd_chunk(*args)
    return clock() - start, st.theta.copy()


def heads_pass(sgd, n_iparams, cfgs, X, y, clock):
    """One ``sgd_chunk_heads`` pass of the heads ``cfgs``; (seconds, the heads' thetas)."""
    states = [HeadState.new(cfg) for cfg in cfgs]
    fparams, iparams, noise_var, eulerian, classes, forms, stacked, traces, trace_steps = \
        _pack_heads(cfgs, states)
    values = dict(
        addresses=X.ctypes.data + np.arange(X.shape[0], dtype=np.int64) * X.strides[0],
        like=_LIKE[X.dtype], y_address=np.int64(y.ctypes.data), y_like=_LIKE[y.dtype],
        n_rows=np.int64(y.shape[0]), fparams=fparams,
        iparams=np.ascontiguousarray(iparams[:, :n_iparams]), noise_var=noise_var,
        eulerian=eulerian, classes=classes, thetas=stacked["theta"],
        theta_avgs=stacked["theta_avg"], intercepts=stacked["intercept"],
        intercept_avgs=stacked["intercept_avg"], carry_X=states[0].carry_X,
        carry_y=states[0].carry_y, counters=stacked["counters"], telemetry=stacked["telemetry"],
        traces=traces, trace_steps=trace_steps, table_form=forms[0], final=False,
        laplace_law=forms[1], weighted=forms[2])
    kernel = getattr(sgd.sgd_chunk_heads, "py_func", sgd.sgd_chunk_heads)
    args = [values[name] for name in inspect.signature(kernel).parameters]
    start = clock()
    sgd.sgd_chunk_heads(*args)
    return clock() - start, stacked["theta"].copy()


def head_grid(cfg, n_heads):
    """n_heads copies of cfg with alpha and learning rate on a grid (as 'auto' varies them)."""
    from dataclasses import replace
    return [replace(cfg, alpha=cfg.alpha * 2.0 ** (h % 5), learning_rate=cfg.learning_rate
                    * 2.0 ** -(h // 5)) for h in range(n_heads)]


def _takes_none_eulerian(sgd) -> bool:
    """Whether this kernel version accepts eulerian=None (for the losses other than logistic)."""
    return "eulerian is not None" in inspect.getsource(sgd)


def main(argv=None) -> None:
    parser = kernel_bench_parser(__doc__.splitlines()[0], repeats=21)
    parser.add_argument("--heads", type=int, default=0,
                        help="time sgd_chunk_heads with this many heads (0: sgd_chunk)")
    parser.add_argument("--label-keep-prob", type=float, default=None,
                        help="private labels kept with this probability (randomized response; "
                             "the default fit's case), instead of public labels")
    parser.add_argument("other", help="another checkout of iwpfast (its iwpfast/_kernels is timed)")
    args = parser.parse_args(argv)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    from iwpfast._kernels import abi, sgd
    versions = {"this": (sgd, len(abi.IPARAM_FIELDS)), "other": load_other(args.other)}
    print(f"# rows={args.rows} batch={args.batch} repeats={args.repeats} clock={args.clock}; "
          f"other={args.other}; M rows/s, medians, alternated in one process")
    print(f"{'loss':<14} {'p':>4} {'dtype':<8} {'other':>8} {'this':>8} {'this/other':>11}")
    for loss, p, dtype, rows in kernel_cases(args):
        cfg = config(loss, p, args.batch, label_keep_prob=args.label_keep_prob)
        X, y = make_data(p, rows, dtype, loss)
        run = one_pass
        if args.heads:
            cfg = head_grid(cfg, args.heads)
            run = heads_pass
        first = {name: run(*v, cfg, X[:, :5000], y[:5000], clock)[1]
                 for name, v in versions.items()}      # compile/load; same model
        if not np.array_equal(first["this"], first["other"]):
            raise SystemExit(f"{loss} p={p} {np.dtype(dtype).name}: the two kernels give "
                             "different models")
        times = {name: [] for name in versions}
        for r in range(args.repeats):
            for name in (list(versions) if r % 2 == 0 else list(versions)[::-1]):
                times[name].append(run(*versions[name], cfg, X, y, clock)[0])
        speed = {n: rows / statistics.median(t) / 1e6 for n, t in times.items()}
        print(f"{loss:<14} {p:>4} {np.dtype(dtype).name:<8} {speed['other']:>8.1f} "
              f"{speed['this']:>8.1f} {speed['this'] / speed['other']:>11.3f}", flush=True)


if __name__ == "__main__":
    main()
