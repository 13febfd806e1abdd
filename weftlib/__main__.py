"""`python -m weftlib run|check`: a thin command line over `weftlib.suite` and `weftlib.params`.

Exit codes: 0 every notebook passed, 1 a notebook failed (the appendix is left as it was), 2 the
parameters or the command line are wrong (nothing ran).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .params import ParamsError, load_plan, validate
from .report import REPO_ROOT

DEFAULT_PARAMS = REPO_ROOT / "params" / "default.yaml"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m weftlib", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute the notebooks and publish the appendix if all pass")
    check = sub.add_parser("check", help="validate a parameter file against the notebooks; run nothing")
    for p in (run, check):
        p.add_argument("--params", type=Path, default=DEFAULT_PARAMS, help="parameter file (default: %(default)s)")
        p.add_argument("--only", nargs="+", metavar="NAME", help="run only these notebooks (never publishes)")
    run.add_argument("--out", type=Path, help="fresh run folder (default: outputs/runs/<UTC time>)")
    run.add_argument("--appendix", type=Path, default=REPO_ROOT / "outputs" / "appendix",
                     help="where a fully passing run is published (default: %(default)s)")
    run.add_argument("--no-publish", action="store_true", help="leave the appendix alone even if all pass")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        plan = load_plan(args.params, args.only)
        if args.command == "check":
            validate(plan)
            print(f"{args.params}: {len(plan.notebooks)} notebooks, parameters valid (hash {plan.digest()})")
            return 0
        from .suite import run_suite

        publish_to = None if (args.no_publish or args.only) else args.appendix
        result = run_suite(plan, out=args.out, appendix=publish_to)
    except (ParamsError, FileExistsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"run index: {result.run_dir / 'index.html'}")
    if not result.passed:
        for nb in result.notebooks:
            if nb.status == "failed":
                print(f"FAILED {nb.describe_error()}\n  executed notebook kept: {result.run_dir / (nb.name + '.ipynb')}",
                      file=sys.stderr)
        print("the appendix was left unchanged", file=sys.stderr)
        return 1
    if result.published:
        print(f"published: {result.published / 'index.html'}")
    elif args.only:
        print("partial run (--only): the appendix was left unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
