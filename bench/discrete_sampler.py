"""The discrete law's sampler kernel against the float law's noise, per value, in user CPU time.

    python bench/discrete_sampler.py            # 65,536 values a call, median of 5 x 60 calls

Three measurements in one process (one thread each; user CPU time, which a shared machine
distorts much less than wall time):
1. ``discrete_finish_f32`` (scale + clip + snap + exact discrete Gaussian from keystream words
   already in memory) over a float32 column;
2. the float law: ``Generator(SFC64).standard_normal(float32)`` into the row + ``finish_f32``;
3. the AES-CTR keystream alone, 2 words a value (what the discrete law reads: ~1.01 attempts of
   2 words a value).
Discrete per value = (1) + (3); compare with (2).
"""
from __future__ import annotations

import argparse
import os
import resource
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def user_ns_per_value(fn, n, reps, rounds=5):
    fn()
    samples = []
    for _ in range(rounds):
        t0 = resource.getrusage(resource.RUSAGE_SELF).ru_utime
        for _ in range(reps):
            fn()
        samples.append((resource.getrusage(resource.RUSAGE_SELF).ru_utime - t0) / (reps * n) * 1e9)
    return float(np.median(samples))


def main(argv=None):
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1 << 16)
    parser.add_argument("--reps", type=int, default=60)
    args = parser.parse_args(argv)

    from iwpfast._kernels import release as kernels
    from iwpfast.privacy.calibration import gaussian_noise_scale
    from iwpfast.privacy.discrete import DiscreteNoise, calibrate_discrete
    from iwpfast.privacy.randomness import NoiseKey

    n = args.n
    sigma0 = gaussian_noise_scale(1.0, 1e-5, 1.0)
    noiser = DiscreteNoise(calibrate_discrete(1.0, 1e-5, 1.0, 10, 1.0, "float32", sigma0))
    words = NoiseKey.from_seed(1).stream(0).words(2 * n + 4096)  # enough for n samples here
    raw = np.random.default_rng(0).uniform(0, 100, n).astype(np.float32)
    out = np.empty(n, np.float32)
    factor = np.ones(n, np.float32)
    mid, inv_half, grid = np.float32(50), np.float32(1 / 50), np.float32(noiser.grid)
    rng = np.random.Generator(np.random.SFC64(0))
    buf = np.empty(2 * n, np.uint64)
    stream = NoiseKey.from_seed(2).stream(0)

    def discrete():
        done, _ = kernels.discrete_finish_f32(raw, mid, inv_half, factor, False, noiser.inv_grid, grid,
                                              0, out, words, 0, *noiser.kernel_args)
        assert done == n

    def floating():
        rng.standard_normal(dtype=np.float32, out=out)
        kernels.finish_f32(raw, mid, inv_half, factor, False, np.float32(sigma0), out)

    def keystream():
        stream.fill(buf)

    d = user_ns_per_value(discrete, n, args.reps)
    f = user_ns_per_value(floating, n, args.reps)
    k = user_ns_per_value(keystream, n, args.reps)
    print(f"user CPU ns per value ({n:,} values a call, median of 5 x {args.reps} calls, "
          f"load {os.getloadavg()[0]:.1f}):")
    print(f"  discrete sampler kernel (words in memory)     {d:6.2f}")
    print(f"  AES-CTR keystream, 2 words a value            {k:6.2f}")
    print(f"  discrete total                                {d + k:6.2f}")
    print(f"  float law: SFC64 normals + finish_f32         {f:6.2f}")
    print(f"  float / discrete                              {f / (d + k):6.2f}")


if __name__ == "__main__":
    main()
