"""`python -m weftlib.gate {device,dfc,pair,probes,evidence,partition,fix}`: a thin shell over weftlib.gate.

device MODEL.onnx [--json]                     the prediction: exit 0 pass, 1 fail, 3 unjudged
dfc MODEL.onnx [--arch ARCH] --out R.json      exit 0 parsed, 1 rejected/unrecognised,
                                               2 no DFC here (prints the docker command) or an arch it refuses
pair MODEL.onnx --dfc R.json|LOG [--matched-by-hand]
                                               exit 0 when the allowlist held, 1 otherwise, 2 when the
                                               result is of another graph (its sha256) or model (or names
                                               none; a raw log is unbound: by name) or a path is bad
probes --out DIR                               one small graph per unjudged op and rule, a manifest, the DFC script
evidence DIR                                   the device_ops.yaml edit the probes' DFC results imply (a diff)
partition MODEL.onnx --out DIR                 the device and host segments, proven equal: exit 0 when the chain
                                               computes the graph, 1 when it does not; then the time per inference
                                               (host measured here, device estimated from the vendor's zoo)
fix MODEL.onnx --out DIR [--inputs X.npz]      exact rewrites answering the gate's findings, proven equal in
                                               onnxruntime: DIR/<stem>.fixed.onnx (only when proven) and
                                               DIR/fix.json, nothing when no rewrite applies; exit 0 pass,
                                               1 refusals remain (or the proof found a difference), 3 only
                                               unjudged remain (or the proof could not judge the fixed graph)

Every command exits 2 with one line on bad input (a missing or unreadable file, a malformed graph, result or
pack, an unwritable --out or one holding files the suite did not write), never a traceback; 130 when interrupted
(Ctrl-C, SIGTERM, SIGHUP), its temporary folders removed.
Every command that reads a model (device, pair, partition, fix) reads it by its path, its external data from
beside it only, and refuses the same models the same way, with exit 2 and no verdict: a model the ONNX checker
rejects, one with external data outside its folder (an absolute path, '..', a symbolic link), a sparse
initializer, two nodes of one name, or a malformed graph. `dfc` gives any model to the DFC as it is: the
DFC's own answer is the evidence. partition and fix also refuse (exit 2) what their proof cannot run: an
input that is no float, integer or bool tensor, or tensors over this machine's memory.
Every --out folder is written whole and keeps what the suite did not write there (weftlib.gate.folder_swap).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from . import (
    EXIT_CODES,
    DeviceOpsError,
    DfcUnavailable,
    check_arch,
    cli_docker_command,
    device_gate,
    load_device_ops,
    load_dfc_result,
    pair,
    run_dfc,
)
from .compiler.dfc_target import default_arch, docker_command
from .compiler.probe_evidence import evidence_diff
from .compiler.probes import write_probes
from .cut.partition import WHOLE_FILE, PartitionError, write_partition
from .cut.segments import TOLERANCE
from .estimate.calibration import zoo_calibration
from .fix import FIXED_SUFFIX, FixError, fix_model, write_fix
from .folder_swap import signals_as_ctrl_c
from .pages import command_lines as closing
from .pages.cut_sentences import estimate_lines
from .predict.summary_lines import finding_lines, static_nodes_of
from .run.cutting import estimate_cuts
from .run_graphs import kind_label
from .vocabulary import DfcVerdict, FolderKind, PairVerdict, Side


class BadInput(ValueError):
    """Input the command cannot work on; the message says which and why (exit 2)."""


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m weftlib.gate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)
    device = sub.add_parser("device", help="predict the DFC's parse, node by node")
    device.add_argument("model")
    device.add_argument("--ops", default=None, help="allowlist file (default params/device_ops.yaml)")
    device.add_argument("--json", action="store_true", help="print the verdict and findings as JSON")
    dfc = sub.add_parser("dfc", help="run the DFC parser (or print how to run it in its image)")
    dfc.add_argument("model")
    dfc.add_argument("--arch", default=None, help="hw arch (default: the target arch of params/device_ops.yaml)")
    dfc.add_argument("--out", default=None, help="where to write the JSON result")
    dfc.add_argument("--start-node-names", nargs="*", default=None)
    dfc.add_argument("--end-node-names", nargs="*", default=None)
    both = sub.add_parser("pair", help="pair the device gate with a DFC result (JSON or raw log)")
    both.add_argument("model")
    both.add_argument("--dfc", default=None, help="the DFC result; omitted: 'DFC not run'")
    both.add_argument("--ops", default=None)
    both.add_argument(
        "--matched-by-hand",
        action="store_true",
        help="the result names no model: state that it is about MODEL (shown as matched by hand)",
    )
    probes = sub.add_parser("probes", help="write the probe pack: one small graph per unjudged op and rule")
    probes.add_argument("--out", required=True)
    probes.add_argument("--ops", default=None)
    probes.add_argument("--extra", nargs="*", default=(), help="more ops to probe (e.g. every op an export uses)")
    ev = sub.add_parser("evidence", help="turn a folder of probe results into the device_ops.yaml edit")
    ev.add_argument("folder")
    ev.add_argument("--ops", default=None)
    cut = sub.add_parser("partition", help="cut a graph into device and host segments and prove the chain")
    cut.add_argument("model")
    cut.add_argument("--out", required=True)
    cut.add_argument("--ops", default=None)
    cut.add_argument(
        "--tolerance", type=float, default=None, help=f"max |chain - graph| allowed (default {TOLERANCE:g})"
    )
    cut.add_argument(
        "--no-estimate", action="store_true", help="skip the time per inference (host timed, device estimated)"
    )
    fix = sub.add_parser("fix", help="rewrite a graph toward what the DFC parses, each rewrite exact and proven")
    fix.add_argument("model")
    fix.add_argument("--out", required=True, help="folder written whole: <stem>.fixed.onnx and fix.json")
    fix.add_argument("--ops", default=None, help="allowlist file (default params/device_ops.yaml)")
    fix.add_argument(
        "--inputs",
        default=None,
        help="an .npz of example inputs by name (each input of the graph, its shape and dtype, finite), "
        "proven on beside random sets",
    )
    return ap


def _device(args: argparse.Namespace) -> int:
    _existing_file(args.model, "MODEL")
    ops = load_device_ops(args.ops)
    result = device_gate(args.model, ops)
    if not result.read:
        print(f"error: {'; '.join(result.problems)}", file=sys.stderr)
        return 2
    if args.json:
        cited = ops.cited(*(f.evidence for f in result.findings))
        print(json.dumps({**result.as_json(), "sources": cited}, indent=2))
        return EXIT_CODES[result.verdict]
    print(
        f"{result.verdict.upper()}: {args.model} ({result.nodes} nodes, IR {result.ir_version}, opset {result.opset})"
    )
    print(f"  graph: {kind_label(args.model)}")  # what its exporter says it is (`run_graphs.GraphIdentity`)
    static = static_nodes_of(args.model)  # constants and shape arithmetic, listed as one line
    closing.print_lines(finding_lines(result, static))
    for problem in result.problems:
        print(f"  problem: {problem}")
    closing.print_lines(closing.device_closing(result, args.model, static))
    return EXIT_CODES[result.verdict]


def _dfc(args: argparse.Namespace) -> int:
    _existing_file(args.model, "MODEL")
    args.arch = args.arch or default_arch()
    out = _writable(args.out, "--out") if args.out else None
    try:
        check_arch(args.arch)
        result = run_dfc(
            args.model, args.arch, start_node_names=args.start_node_names, end_node_names=args.end_node_names
        )
    except ValueError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    except DfcUnavailable as exc:
        print(
            f"the DFC parser is not available here ({exc.reason}); run it in its image:\n"
            f"{docker_command(args.model, args.arch, out=str(out) if out else None)}",
            file=sys.stderr,
        )
        print(f"or, with the DFC's own CLI:\n{cli_docker_command(args.model, args.arch)}", file=sys.stderr)
        closing.print_lines(closing.dfc_missing_lines(args.model, str(out) if out else None), stderr=True)
        return 2
    if out is not None:
        out.write_text(result.to_json())
    print(f"{result.verdict}: {result.reason}")
    for error in result.errors:
        print(f"  {error.cls} in op {error.node}: {error.message}")
    closing.print_lines(closing.dfc_closing(result, args.model, str(out) if out else None))
    return 0 if result.verdict == DfcVerdict.PARSED else 1


def _pair(args: argparse.Namespace) -> int:
    _existing_file(args.model, "MODEL")
    if args.dfc:
        _existing_file(args.dfc, "--dfc")
    gate = device_gate(args.model, load_device_ops(args.ops))
    if not gate.read:
        raise BadInput(f"MODEL: {'; '.join(gate.problems)}: a graph the gate cannot read cannot be paired")
    dfc = load_dfc_result(args.dfc) if args.dfc else None
    result = pair(gate, dfc, args.model, by_hand=args.matched_by_hand)
    if result.verdict in (PairVerdict.FOREIGN_RESULT, PairVerdict.UNMATCHED):
        print(f"refused: {result.meaning}", file=sys.stderr)
        return 2
    print(
        f"{result.verdict}: device gate {result.gate}, DFC {result.dfc}"
        + (f" (matched {result.matched})" if result.matched else "")
        + f". {result.meaning}"
    )
    for edit in result.edits:
        print(f"  {edit.action} {edit.op}: {edit.reason}")
    closing.print_lines(closing.pair_closing(result, gate, args.model))
    return 0 if result.verdict == PairVerdict.HELD else 1


WRITTEN_FROM_MODEL = {FolderKind.FIX: FIXED_SUFFIX, FolderKind.PARTITION: ".00.device.onnx"}  # after its stem
BUILD_NAME = 40  # what the build folder's name adds to the target's: `.<name>.build-<pid>-<random>`


def _check_paths(args: argparse.Namespace) -> None:
    """The paths a command names, refused in one line before any work: a symbolic link loop, or a name the
    files it writes from the model's (`<stem>.fixed.onnx`, `<stem>.00.device.onnx`) would make too long."""
    for what in ("model", "out", "dfc", "folder", "inputs", "ops"):
        path = getattr(args, what, None)
        if path is None:
            continue
        flag = what.upper() if what in ("model", "folder") else f"--{what}"
        try:
            Path(path).resolve()
        except (RuntimeError, OSError) as exc:  # RuntimeError: Python 3.11's word for a link loop
            raise BadInput(f"{flag}: {path} cannot be resolved ({exc}); a symbolic link loop?") from None
        name, limit = Path(path).name, _name_max(Path(path).parent)
        if what == "out" and (args.command in WRITTEN_FROM_MODEL or not hasattr(args, "model")):  # a folder
            limit -= BUILD_NAME  # the folder is built beside it under a longer name (`folder_swap`)
        if len(name.encode()) > limit:
            raise BadInput(
                f"{flag}: the name {name[:40]}... is {len(name.encode())} bytes; this file system takes {limit} here"
            )
    model, out = getattr(args, "model", None), getattr(args, "out", None)
    if model and out and args.command in WRITTEN_FROM_MODEL:
        longest = Path(model).stem + WRITTEN_FROM_MODEL[FolderKind(args.command)]
        limit = _name_max(Path(out).parent)
        if len(longest.encode()) > limit:
            raise BadInput(
                f"MODEL: its name is too long for the files {args.command} writes from it ({longest[:40]}... is "
                f"{len(longest.encode())} bytes, over this file system's {limit}); copy it under a shorter name"
            )


def _name_max(folder: Path) -> int:
    """The longest file name (bytes) the file system holding `folder` (or its nearest existing parent) takes."""
    above = next((p for p in (folder, *folder.parents) if p.is_dir()), Path("."))
    try:
        return int(os.pathconf(above, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255


def _existing_file(path: str, what: str) -> None:
    """A clear error for a path that is not a readable file (a folder, a typo), instead of a traceback."""
    p = Path(path)
    if p.is_dir():
        raise BadInput(f"{what}: {path} is a directory; give a file")
    if not p.is_file():
        raise BadInput(f"{what}: {path} does not exist")


def _writable(path: str, what: str) -> Path:
    """`path` as a file this process can create or replace, else a clear error before any work is done."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise BadInput(f"{what}: {path} is a directory; give a file path")
    if not parent.is_dir() or not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise BadInput(f"{what}: cannot write {path} (no such folder, or not writable)")
    return p


def _probes(args: argparse.Namespace) -> int:
    out = Path(args.out)
    parent = out.parent if str(out.parent) else Path(".")
    if parent.exists() and not os.access(parent, os.W_OK):
        raise BadInput(f"--out: cannot write into {parent} (not writable)")
    pack = write_probes(out, load_device_ops(args.ops), extra=args.extra)
    print(f"{len(pack.probes)} probes in {pack.folder}; run the DFC over all of them with:\n  bash {pack.script}")
    for probe in pack.probes:
        print(f"  {probe.file}  {probe.label}: {probe.why}")
    for subject, why in pack.unbuilt.items():
        print(f"  NOT PROBED {subject}: {why}")
    closing.print_lines(closing.probes_closing(pack))
    return 0


def _evidence(args: argparse.Namespace) -> int:
    diff, rows = evidence_diff(args.folder, args.ops)
    for row in rows:
        print(f"{row['subject']}: {row['finding']}")
    print(diff or "no change: no probe result changes params/device_ops.yaml")
    closing.print_lines(closing.evidence_closing(rows, diff, args.folder))
    return 0


def _partition(args: argparse.Namespace) -> int:
    _existing_file(args.model, "MODEL")
    ops = load_device_ops(args.ops)
    tolerance = TOLERANCE if args.tolerance is None else args.tolerance
    if not (tolerance >= 0 and tolerance != float("inf")):
        raise BadInput(f"--tolerance: expected a finite number >= 0, got {args.tolerance}")
    try:
        part = write_partition(args.model, ops, args.out, tolerance=tolerance)
    except PartitionError as exc:
        raise BadInput(str(exc)) from exc
    c = part.coverage
    print(
        f"{part.model}: {len(part.device_segments)} device segment(s) of {len(part.segments)}; "
        f"{c.nodes[0]} of {c.nodes[1]} nodes, {c.share('macs'):.1%} of the MACs and {c.share('params'):.1%} of the "
        f"parameters on the device; {c.crossings} crossings, {c.bytes_crossing:,} bytes per inference"
    )
    for s in part.segments:
        what = f"  {s.file}: {s.runs_on}, {len(s.nodes)} nodes"
        if s.runs_on == Side.DEVICE:
            what += f", start {list(s.start_node_names)}, end {list(s.end_node_names)}"
        print(what)
    for why in sorted({w for w in part.moved_to_host.values() if w.startswith(WHOLE_FILE)}):
        print(f"  no device segment: {why}")
    print(
        f"chain vs graph: max |diff| {part.max_abs_diff:.3g} (tolerance {part.tolerance:g}): {'proven' if part.proven else 'NOT equal'}"
    )
    if part.proven and not args.no_estimate:
        model, calibration = Path(args.model), zoo_calibration()
        for line in estimate_lines(
            estimate_cuts({model: part}, {model: Path(args.out)}, calibration)[model], calibration
        ):
            print(line)
    closing.print_lines(closing.partition_closing(part, args.model, args.out))
    return 0 if part.proven else 1


def _fix(args: argparse.Namespace) -> int:
    _existing_file(args.model, "MODEL")
    examples = None
    if args.inputs:
        _existing_file(args.inputs, "--inputs")
        try:
            with np.load(args.inputs) as arrays:
                examples = {f"example inputs {Path(args.inputs).name}": {k: arrays[k] for k in arrays.files}}
        except Exception as exc:  # a file np.load cannot read: a bad zip, a pickle, a plain .npy
            raise BadInput(f"--inputs: {args.inputs} is not an .npz of arrays ({exc})") from exc
    try:
        fixed = fix_model(args.model, load_device_ops(args.ops), examples=examples)
    except FixError as exc:
        raise BadInput(str(exc)) from exc
    if not fixed.rewrites:
        left = sorted({str(u["rule"]) for u in fixed.unanswered})
        print(
            f"{fixed.before.verdict}: no rewrite answers a finding of {args.model}; nothing written"
            + (f" ({len(fixed.unanswered)} refusal(s) left: {', '.join(left)})" if left else "")
        )
        closing.print_lines(closing.fix_closing(fixed, None, args.model))
        return fixed.exit_code
    path = write_fix(fixed, args.out)
    if path is not None:
        print(f"{fixed.before.verdict} -> {fixed.after.verdict}: {path} ({len(fixed.rewrites)} rewrite(s))")
    else:
        print(
            f"{fixed.before.verdict}: the fixed graph is not offered (proof: {fixed.proof.verdict}); "
            f"{Path(args.out) / 'fix.json'} says why ({len(fixed.rewrites)} rewrite(s) tried)"
        )
    for a in fixed.rewrites:
        print(f"  {a.rewrite} answers {', '.join(a.answers)}: {len(a.replaced)} nodes -> {len(a.produced)}")
    for u in fixed.unanswered:
        print(f"  unanswered {u['node']} by {u['rule']}: {u['why']}")
    print(f"proof: {fixed.proof.summary()}")
    closing.print_lines(closing.fix_closing(fixed, path, args.model))
    return fixed.exit_code


COMMANDS = {
    "device": _device,
    "dfc": _dfc,
    "pair": _pair,
    "probes": _probes,
    "evidence": _evidence,
    "partition": _partition,
    "fix": _fix,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        with signals_as_ctrl_c():  # SIGTERM and SIGHUP take Ctrl-C's way out: temporary folders removed, 130
            _check_paths(args)
            return COMMANDS[args.command](args)
    except (DeviceOpsError, BadInput, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM or SIGHUP, anywhere in the command
        print(f"interrupted ({exc or 'SIGINT'})", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
