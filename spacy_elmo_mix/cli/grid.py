"""``python -m spacy_elmo_mix grid``: run datasets x schemes x seeds, locally or on a Ray cluster.

Each job is the command template with ``{dataset}``, ``{scheme}``, ``{seed}`` and ``{output}`` (the
run's folder, where it must write ``metrics.json``) filled in; its output goes to
``RESULTS/runs/{dataset}/{scheme}/seed{N}/log.txt``. Finished jobs (metrics.json present) are skipped.
Example::

    python -m spacy_elmo_mix grid --datasets conll2003 --schemes layer1 weighted --seeds 1 2 3 \\
        --command-template "python scripts/run_one.py {dataset} {scheme} {seed} {output}"
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional

from . import HelpFormatter, description, program


def main(argv: Optional[List[str]] = None) -> int:
    from ..workflow.grid import BACKENDS, run_grid

    parser = argparse.ArgumentParser(
        prog=program("grid"), description=description(__doc__), formatter_class=HelpFormatter
    )
    parser.add_argument("--datasets", nargs="+", required=True, help="dataset ids")
    parser.add_argument("--schemes", nargs="+", required=True, help="weighting scheme ids")
    parser.add_argument("--seeds", nargs="+", type=int, required=True, help="random seeds")
    parser.add_argument("--command-template", required=True, help="the job's command line, with placeholders")
    parser.add_argument("--results", type=Path, default=Path("results"), help="the results folder")
    parser.add_argument("--backend", choices=sorted(BACKENDS), default="local", help="local or ray")
    parser.add_argument("--address", help="ray: the cluster's address (default: start a local instance)")
    parser.add_argument("--ray-working-dir", help="ray: ship this folder to the cluster as the jobs' working folder")
    parser.add_argument("--connect-timeout", type=float, default=60.0, help="ray: seconds to wait for the cluster")
    parser.add_argument("--max-workers", type=int, help="parallel jobs (default or 0: the free cores)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.backend != "ray" and (args.address or args.ray_working_dir):
        parser.error("--address and --ray-working-dir need --backend ray")
    bad_seeds = [seed for seed in args.seeds if not 0 <= seed < 2**32]
    if bad_seeds:
        parser.error(f"--seeds must be in 0..2**32-1, got {', '.join(map(str, bad_seeds))}")
    if (args.max_workers or 0) < 0 or not args.connect_timeout > 0:
        parser.error("--max-workers must be 0 (the free cores) or more and --connect-timeout positive")
    if "spacy_elmo_mix run" in args.command_template:  # the package's run command: check its schemes now
        from ..workflow.run import SCHEMES

        unknown = [s for s in args.schemes if s not in SCHEMES]
        if unknown:
            parser.error(f"unknown scheme(s) {', '.join(unknown)}; choose from {', '.join(SCHEMES)}")
    runtime_env = {"working_dir": args.ray_working_dir} if args.ray_working_dir else None
    try:
        summary = run_grid(
            args.datasets,
            args.schemes,
            args.seeds,
            args.command_template,
            args.backend,
            args.results,
            args.max_workers or None,
            args.address or None,
            runtime_env=runtime_env,
            progress=not args.no_progress,
            connect_timeout=args.connect_timeout,
        )
    except (RuntimeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(summary.format())
    if summary.failed:
        names = ", ".join(str(r.job) for r in summary.failed)
        print(
            f"error: {len(summary.failed)} of {len(summary.results)} jobs failed ({names}); their logs are under {args.results}",
            file=sys.stderr,
        )
        return 1
    return 0
