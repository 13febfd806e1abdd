"""`python -m weftlib run|check|status|publish`: a thin command line over `weftlib.suite`.

Exit codes: 0 every notebook passed (or the page was written), 1 a notebook failed (the appendix is left as it
was), 2 the parameters, the command line or the publishing target are wrong (nothing ran, nothing written),
130 the run was interrupted (Ctrl-C, SIGTERM, SIGHUP), one line saying so; its folder says so in state.json,
and nothing is left in the temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path

from .suite.params import DEFAULT_PLAN, ParamsError, apply_settings, load_plan, validate
from .suite.publish import PublishError
from .suite.room import NoRoom
from .suite.runfolder import SummaryError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m weftlib", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute the notebooks and publish the run if all pass")
    check = sub.add_parser("check", help="validate a parameter file against the notebooks; run nothing")
    for p in (run, check):
        p.add_argument("--params", type=Path, default=DEFAULT_PLAN, help="parameter file (default: %(default)s)")
        p.add_argument("--only", nargs="+", metavar="NAME", help="run only these notebooks (never publishes)")
        p.add_argument(
            "--set",
            action="append",
            metavar="KEY=VALUE",
            dest="settings",
            help="give every notebook of the plan that has parameter KEY this value (YAML), e.g. "
            "--set hub_dir=../NAF --set host_root=../Pixal3D; repeatable",
        )
    run.add_argument("--out", type=Path, help="fresh run folder (default: outputs/runs/<UTC time>)")
    run.add_argument(
        "--appendix",
        type=Path,
        default=None,
        help="where a fully passing run is copied, a path the suite made or a new one (default: outputs/appendix "
        "for the full plan, params/appendix.yaml; outputs/smoke otherwise)",
    )
    run.add_argument("--no-publish", action="store_true", help="leave the published copy alone even if all pass")
    status = sub.add_parser("status", help="say what state a run folder is in")
    status.add_argument("run_dir", type=Path)
    publish = sub.add_parser("publish", help="write the RFD figure page (page.qmd) from a fully passing run")
    publish.add_argument("run_dir", type=Path, help="a run folder (e.g. outputs/appendix)")
    publish.add_argument("--rfd", type=Path, required=True, help="the RFD folder (holds README.md '# RFD NNNN: ...')")
    publish.add_argument("--page", default="page.qmd", help="file name inside the RFD folder (default: %(default)s)")
    return parser


class BadPath(ValueError):
    """A folder the command line names that no run can be written to; the message says why (exit 2)."""


def _writable_folder(path: Path | None, flag: str) -> None:
    """Refuse, before anything runs, a folder to be made at `path` that cannot be: a symbolic link loop, a
    file on the way (`file.txt/sub`), a name too long for its file system."""
    if path is None:
        return
    try:
        Path(path).resolve()
    except (RuntimeError, OSError) as exc:  # RuntimeError: Python 3.11's word for a link loop
        raise BadPath(f"{flag} {path}: cannot be resolved ({exc}); a symbolic link loop?") from None
    absolute = Path(os.path.abspath(path))
    existing = next(p for p in (absolute, *absolute.parents) if os.path.lexists(p))
    if existing != absolute and not existing.is_dir():
        raise BadPath(f"{flag} {path}: {existing} is a file, so no folder can be made inside it")
    for part in absolute.relative_to(existing).parts:
        limit = _name_max(existing)
        if len(part.encode()) > limit:
            raise BadPath(f"{flag} {path}: the name {part[:40]}... is {len(part.encode())} bytes, over {limit}")


def _name_max(folder: Path) -> int:
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255


def _run(args: argparse.Namespace) -> int:
    from .suite.runner import RunInterrupted, default_publish_dir, run_suite

    _writable_folder(args.out, "--out")
    _writable_folder(args.appendix, "--appendix")
    plan = apply_settings(load_plan(args.params, args.only), args.settings)
    publish_to = None if (args.no_publish or args.only) else (args.appendix or default_publish_dir(plan))
    try:
        result = run_suite(plan, out=args.out, appendix=publish_to, partial=bool(args.only))
    except RunInterrupted as exc:
        print(f"interrupted: {exc}", file=sys.stderr)
        return 130
    print(f"run index: {result.run_dir / 'index.html'}")
    if not result.passed:
        for nb in result.notebooks:
            if nb.status == "failed":
                print(
                    f"FAILED {nb.describe_error()}\n  executed notebook kept: {result.run_dir / (nb.name + '.ipynb')}",
                    file=sys.stderr,
                )
        print("the published copy was left unchanged", file=sys.stderr)
        return 1
    if result.published:
        print(f"published: {result.published / 'index.html'}")
    elif args.only:
        print("partial run (--only): nothing was published")
    return 0


def _as_ctrl_c(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    saved = {}  # SIGTERM and SIGHUP take Ctrl-C's way out for the whole command (unless ignored, as under nohup)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is not signal.SIG_IGN:
                saved[sig] = signal.signal(sig, _as_ctrl_c)
    try:
        return _command(args)
    except KeyboardInterrupt as exc:  # a run's own interruption is `RunInterrupted` (`_run`): this is before it
        before = " before the run started; nothing ran" if args.command in ("run", "check") else ""
        print(f"interrupted ({exc or 'Ctrl-C'}){before}", file=sys.stderr)
        return 130
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def _command(args: argparse.Namespace) -> int:
    try:
        if args.command == "check":
            plan = apply_settings(load_plan(args.params, args.only), args.settings)
            validate(plan)
            print(f"{args.params}: {len(plan.notebooks)} notebooks, parameters valid (hash {plan.digest()})")
            return 0
        if args.command == "status":
            from .suite.runfolder import read_state

            state = read_state(args.run_dir)
            print(json.dumps(state, indent=2))
            return 0 if state.get("state") == "passed" else 1
        if args.command == "publish":
            from .suite.publish import publish_rfd

            target, block = publish_rfd(args.run_dir, args.rfd, args.page)
            print(f"wrote {target}\n\nHeadline measurements (paste into DETAILS.md):\n\n{block}")
            return 0
        return _run(args)
    except (ParamsError, FileExistsError, PublishError, SummaryError, BadPath, NoRoom) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
