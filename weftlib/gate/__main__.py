"""`python -m weftlib.gate {device,dfc,pair}`: a thin shell over weftlib.gate.

device MODEL.onnx                              exit 0 PASS, 1 FAIL (prints the ops outside DEVICE_OPS)
dfc MODEL.onnx --arch hailo10h --out R.json    exit 0 parsed, 1 rejected/unrecognised,
                                               2 no DFC here (prints the docker command) or an arch it refuses
pair MODEL.onnx --dfc R.json|LOG               exit 0 when the allowlist held, 1 otherwise
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from . import (DfcUnavailable, DeviceOpsError, check_arch, cli_docker_command, device_gate, load_device_ops,
               load_dfc_result, pair, run_dfc)
from .pairing import HELD


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m weftlib.gate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    device = sub.add_parser("device", help="check every op against DEVICE_OPS")
    device.add_argument("model")
    device.add_argument("--ops", default=None, help="allowlist file (default params/device_ops.yaml)")
    dfc = sub.add_parser("dfc", help="run the DFC parser (or print how to run it in its image)")
    dfc.add_argument("model")
    dfc.add_argument("--arch", default="hailo10h")
    dfc.add_argument("--out", default=None, help="where to write the JSON result")
    dfc.add_argument("--start-node-names", nargs="*", default=None)
    dfc.add_argument("--end-node-names", nargs="*", default=None)
    both = sub.add_parser("pair", help="pair the device gate with a DFC result (JSON or raw log)")
    both.add_argument("model")
    both.add_argument("--dfc", default=None, help="the DFC result; omitted: 'DFC not run'")
    both.add_argument("--ops", default=None)
    return ap


def _device(args: argparse.Namespace) -> int:
    result = device_gate(args.model, load_device_ops(args.ops))
    print(f"{'PASS' if result.passed else 'FAIL'}: {args.model} ({result.nodes} nodes, IR {result.ir_version}, "
          f"opset {result.opset})")
    for op, use in result.outside.items():
        print(f"  outside DEVICE_OPS: {op} x{use.count}  e.g. {', '.join(use.nodes[:3])}")
    for problem in result.problems:
        print(f"  {problem}")
    return 0 if result.passed else 1


def _dfc(args: argparse.Namespace) -> int:
    try:
        check_arch(args.arch)
        result = run_dfc(args.model, args.arch, start_node_names=args.start_node_names,
                         end_node_names=args.end_node_names)
    except ValueError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    except DfcUnavailable as exc:
        print(exc, file=sys.stderr)
        print(f"or, with the DFC's own CLI:\n{cli_docker_command(args.model, args.arch)}", file=sys.stderr)
        return 2
    if args.out:
        Path(args.out).write_text(result.to_json())
    print(f"{result.verdict}: {result.reason}")
    for error in result.errors:
        print(f"  {error.cls} in op {error.node}: {error.message}")
    return 0 if result.verdict == "parsed" else 1


def _pair(args: argparse.Namespace) -> int:
    gate = device_gate(args.model, load_device_ops(args.ops))
    dfc = load_dfc_result(args.dfc) if args.dfc else None
    result = pair(gate, dfc, args.model)
    print(f"{result.verdict}: device gate {result.gate}, DFC {result.dfc}. {result.meaning}")
    for edit in result.edits:
        print(f"  {edit.action} {edit.op}: {edit.reason}")
    return 0 if result.verdict == HELD else 1


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return {"device": _device, "dfc": _dfc, "pair": _pair}[args.command](args)
    except (DeviceOpsError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
