"""Reproduce the paper's Sec. 5 synthetic experiments (make_classification, p = 2 and p = 10).

Same code as `iwpfast experiment NAME`; a quick reduced run by default, the paper's size with
--full. Results (JSON, PNG figures, Markdown tables) go to ./iwpfast-results/.

    python examples/experiment_synthetic.py          # 3 seeds, 20,000 training rows (about a minute)
    python examples/experiment_synthetic.py --full   # 20 seeds at the paper's size
"""
import sys

from iwpfast.experiments import run

full = "--full" in sys.argv
for name in "synthetic-p2 synthetic-p10".split():
    for result in run(name, seeds=20 if full else 3, n_train=None if full else 20_000,
                      out_dir="iwpfast-results"):
        print(f"## {result['setting']['title']}\n")
        print(result["table"])
