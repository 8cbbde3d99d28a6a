"""CPU time of a fit on a Dask cluster against one process ('auto' hyper-parameters, the default).

    python bench/dask_fit_cpu.py --rows 2000000 --repeat 2

Releases ``--rows`` rows (p = 10, 8 parts) once, then fits ``IWPClassifier()`` ('auto': the grid
of heads, a hold-out) in this process (``fit``) and with ``fit_files`` on local clusters of 1 and
2 workers (one thread each, ``local_client``'s worker settings), ``--repeat`` times each.
Prints the CPU seconds each took -- this process's for ``fit``; the workers' (all their threads)
plus this client's for ``fit_files`` -- and the parallel efficiency in worker CPU time (1 worker's
CPU / 2 workers' CPU).  CPU time, not wall time: the machine is shared.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
from dask_release import _process_cpu_seconds, make_raw  # noqa: E402


def own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main():
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import iwpfast
    from iwpfast.distributed import close_client, fit_files, local_client
    from iwpfast.privacy import release

    p = 10
    with tempfile.TemporaryDirectory() as tmp:
        make_raw(os.path.join(tmp, "raw"), 8, args.rows // 8, p)
        spec = iwpfast.ReleaseSpec(epsilon_x=2.0, delta=1e-5, bound=p ** 0.5, epsilon_y=1.0,
                                   ranges={f"x{j}": (-1, 1) for j in range(p)})
        rel = os.path.join(tmp, "rel") + "/"
        release(os.path.join(tmp, "raw"), rel, spec, [f"x{j}" for j in range(p)], "y", seed=1)
        iwpfast.IWPClassifier(progress=False).fit(rel)          # compile / load the kernels
        serial = []
        for _ in range(args.repeat):
            c0 = own_cpu()
            iwpfast.IWPClassifier(progress=False).fit(rel)
            serial.append(own_cpu() - c0)
        cluster_cpu = {}
        for n in (1, 2):
            client = local_client(n)
            try:
                fit_files(client, rel, iwpfast.IWPClassifier(progress=False))   # warm-up
                runs = []
                for _ in range(args.repeat):
                    before, c0 = client.run(_process_cpu_seconds), own_cpu()
                    fit_files(client, rel, iwpfast.IWPClassifier(progress=False))
                    after, client_cpu = client.run(_process_cpu_seconds), own_cpu() - c0
                    workers = sum(after[w] - before[w] for w in after)
                    runs.append((workers, client_cpu))
                cluster_cpu[n] = runs
            finally:
                close_client(client)
    print(f"load average {os.getloadavg()}; {args.rows:,} rows, p = {p}, 'auto'; medians of "
          f"{args.repeat}")
    print(f"fit in one process: {statistics.median(serial):.2f} CPU s")
    for n, runs in cluster_cpu.items():
        print(f"fit_files, {n} worker(s): workers {statistics.median(r[0] for r in runs):.2f} "
              f"CPU s, client {statistics.median(r[1] for r in runs):.2f} CPU s")
    one = statistics.median(r[0] for r in cluster_cpu[1])
    two = statistics.median(r[0] for r in cluster_cpu[2])
    print(f"parallel efficiency in worker CPU time (1 worker / 2 workers): {one / two:.2f}")


if __name__ == "__main__":
    main()
