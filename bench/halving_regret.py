"""What successive halving costs the 'auto' choice: its regret against the full grid's, by seed.

    python bench/halving_regret.py --rows 1000000 --seeds 1-24      # ~10 min on 2 cores
    python bench/halving_regret.py --rows 4000000 --seeds 0-5 --no-before

For each seed: the Parquet release of ``bench/default_cost.py`` (``--rows`` x 10, features
uniform on [-1, 1], eps_x = 4, eps_y = 2; the data drawn with the seed, the noise with seed +
100), fitted by the default ``IWPClassifier().fit(path)`` with the full grid (``PRUNE_AT = ()``)
and with the halving.  The regret of a halved fit: the full grid's private hold-out risk of the
head it chose less that of the full grid's own choice (the same heads, the same hold-out, so
a survivor's risk is the full grid's).  ``before`` (unless ``--no-before``): the same with the
rule before issue 33's cost round (chunks of a power of two near the first rung's rows, each
rung at the first chunk end past its share; the largest alpha's best head kept beside the best
third, 3 survivors a class).  Prints one JSON line per seed, then the means and the paired
difference with its standard error.  Temporary files are removed.  Not run by the test suite.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def _seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def _before_rule(tuning):
    """(chunk_rows, _halve) of the race before the cost round, to patch into ``_Race``."""
    from iwpfast.io.reader import MIN_DEFAULT_CHUNK_ROWS, default_chunk_rows

    def chunk_rows(self, n_features):
        self.rows = [r for r in sorted(set(self.targets))
                     if self.validation_rows(r) >= tuning.PRUNE_MIN_ROWS]
        near = 1 << max(0, round(math.log2(max(self.rows[0], 1))))
        return int(max(MIN_DEFAULT_CHUNK_ROWS,
                       min(near, default_chunk_rows(8 * (int(n_features) + 1)))))

    def halve(self, alive, estimates, reliable, floor, share):
        ok, out = set(reliable), []
        for members in self._grouped(alive).values():
            keep = max(tuning.HALVING_MIN, math.ceil(share * len(members) - 1e-9))
            if keep >= len(members) or len(members) <= tuning.HALVING_MIN + 1:
                continue                # then: a group of 3 was not scored
            ranked = sorted(members, key=lambda i: (
                (0, estimates[i].risk - floor[i]) if i in ok
                else (1, estimates[i].noise_energy if math.isfinite(estimates[i].noise_energy)
                      else math.inf), i))
            kept = ranked[:keep]
            top = max(self.points[alive[i]].alpha for i in members)
            firm = next(i for i in ranked if self.points[alive[i]].alpha == top)
            if firm not in kept:
                kept.append(firm)
            out += [alive[i] for i in ranked if i not in kept]
        return out
    return chunk_rows, halve


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--seeds", default="1-8", help="e.g. 1-24 or 0,3,5")
    ap.add_argument("--no-before", action="store_true", help="only the library's halving")
    a = ap.parse_args(argv)
    from default_cost import machine, write_release

    from iwpfast import IWPClassifier
    from iwpfast.sgd import tuning
    print(f"# {machine()}", flush=True)
    rules = {"now": (tuning._Race.chunk_rows, tuning._Race._halve)}
    if not a.no_before:
        rules["before"] = _before_rule(tuning)
    regrets: dict[str, list[float]] = {name: [] for name in rules}
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory(prefix="iwpfast-regret-") as tmp:
        for seed in _seeds(a.seeds):
            path = Path(tmp) / f"release_{seed}.parquet"
            write_release(path, a.rows, 10, seed=seed, release_seed=seed + 100)
            saved = tuning.PRUNE_AT
            tuning.PRUNE_AT = ()
            try:
                full = IWPClassifier(progress=False).fit(path).tuning_
            finally:
                tuning.PRUNE_AT = saved
            chosen = full["chosen"].index(True)
            line = {"seed": seed, "full_choice_risk": round(full["risk"][chosen], 5),
                    "stderr": round(full["stderr"][chosen], 5)}
            for name, (chunk_rows, halve) in rules.items():
                kept = tuning._Race.chunk_rows, tuning._Race._halve
                tuning._Race.chunk_rows, tuning._Race._halve = chunk_rows, halve
                try:
                    t = IWPClassifier(progress=False).fit(path).tuning_
                finally:
                    tuning._Race.chunk_rows, tuning._Race._halve = kept
                regret = full["risk"][t["chosen"].index(True)] - full["risk"][chosen]
                regrets[name].append(regret)
                line[name] = round(regret, 5)
            print(json.dumps(line), flush=True)
    for name, values in regrets.items():
        print(f"# {name}: mean regret {statistics.mean(values):.4f} over {len(values)} seeds")
    if "before" in regrets and len(regrets["now"]) > 1:
        d = [x - y for x, y in zip(regrets["now"], regrets["before"], strict=True)]
        print(f"# now - before: {statistics.mean(d):+.4f} +- "
              f"{statistics.stdev(d) / math.sqrt(len(d)):.4f} (one standard error)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
