"""What each gate command prints last: its totals, and a `next:` line with the command that follows.

The loop a user's own graph goes through is `device` -> `fix` -> `probes` -> `dfc` -> `pair` (and `evidence`
after the probes' DFC run; `partition` where refusals remain): each command ends by saying which step is next,
with the command written out for the user's own files, so nobody has to read the README to go on.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from ...onnx_core.walk import index_model
from ..compiler.dfc_log import DfcResult
from ..compiler.dfc_target import IMAGE_HOWTO, image, image_lines
from ..compiler.pairing import Pairing
from ..compiler.probes import ProbePack
from ..cut.segments import Partition
from ..fix.report import Fix
from ..predict.device import GateResult
from ..predict.summary_lines import gate_totals, static_nodes, static_nodes_of, totals_lines
from ..vocabulary import GateVerdict, PairVerdict, Prediction, Side, Subject

REEXPORT = "re-export the graph: the problems above are the file's own (IR, opset, checker), which no rewrite changes"


def command(*words: object) -> str:
    """`python -m weftlib.gate ...` as a shell line, paths quoted."""
    return shlex.join(["python", "-m", "weftlib.gate", *(str(w) for w in words)])


def beside(model: str, suffix: str) -> str:
    """A path next to `model`, named after its stem (`net.onnx` -> `net_fix`, `net.dfc.json`)."""
    path = Path(model)
    return str(path.with_name(path.stem + suffix))


def _probes_next(gate: GateResult) -> str:
    """`probes`, with `--extra` naming the unjudged ops the listing does not hold (the listed ones it probes
    anyway)."""
    extra = [f.op for f in gate.findings if f.prediction == Prediction.UNJUDGED and f.op in gate.outside]
    return command("probes", "--out", "probes", *(["--extra", *dict.fromkeys(extra)] if extra else []))


def device_closing(result: GateResult, model: str, static: frozenset[str] | None = None) -> list[str]:
    """`device`'s totals and its next step: `fix` for a graph with findings, the DFC for one predicted to parse."""
    lines = gate_totals(result, static)
    if result.verdict == GateVerdict.PASS:
        return [
            *lines,
            f"next: {command('dfc', model, '--out', beside(model, '.dfc.json'))}  (the DFC's parse confirms it)",
        ]
    if result.problems and not result.findings:
        return [*lines, f"next: {REEXPORT}"]
    return [
        *lines,
        f"next: {command('fix', model, '--out', beside(model, '_fix'))}  (exact rewrites for what the gate holds "
        "against it; then probes, dfc, pair)",
    ]


def fix_closing(fix: Fix, written: Path | None, model: str) -> list[str]:
    """`fix`'s totals (the fixed graph's prediction, the original's when no rewrite applied) and its next step: the
    DFC on a graph predicted to parse, `probes` for what stays unjudged, `partition` to keep the refusals no rewrite
    answers on the host."""
    after = fix.after
    target = str(written) if written is not None and fix.rewrites else model
    static = static_nodes(index_model(fix.fixed))
    lines = gate_totals(after, static, "totals after the fix")
    if fix.rewrites and not fix.proof.proven:
        return [
            *lines,
            f"next: keep the original (the proof failed): {command('partition', model, '--out', beside(model, '_cut'))}",
        ]
    if after.verdict == GateVerdict.PASS:
        return [*lines, f"next: {command('dfc', target, '--out', beside(target, '.dfc.json'))}  (the DFC's parse)"]
    refused = any(f.prediction == Prediction.REFUSED for f in after.findings)
    unjudged = sum(f.prediction == Prediction.UNJUDGED for f in after.findings)
    steps = []
    if unjudged:
        steps.append(f"{_probes_next(after)}  (asks the DFC about the {unjudged} unjudged finding(s))")
    if refused:
        steps.append(
            f"{command('partition', target, '--out', beside(target, '_cut'))}  (the refusals no rewrite answers "
            "go to the host)"
        )
    steps = steps or [REEXPORT]  # only the file's own problems are left
    return [*lines, *(f"{'next' if i == 0 else 'then'}: {s}" for i, s in enumerate(steps))]


def partition_closing(part: Partition, model: str, out: str) -> list[str]:
    """`partition`'s totals by side and the gate's on the whole graph, and what the segments are for."""
    device = part.device_segments
    host = [s for s in part.segments if s.runs_on == Side.HOST]
    lines = [
        f"totals: {sum(len(s.nodes) for s in device)} node(s) in {len(device)} device segment(s), "
        f"{sum(len(s.nodes) for s in host)} in {len(host)} host segment(s)"
    ]
    if part.prediction is not None:
        lines += totals_lines(part.prediction, static_nodes_of(model), label="  the gate on the whole graph")
    if not part.proven:
        return [*lines, "next: do not deploy this cut: the chain does not compute the graph (see the line above)"]
    if not device:
        return [
            *lines,
            f"next: nothing runs on the device: {command('fix', model, '--out', beside(model, '_fix'))} first",
        ]
    first = Path(out) / device[0].file
    others = f" and likewise for the other {len(device) - 1}" if len(device) > 1 else ""
    host_step = (
        f"run the {len(host)} host segment(s) in onnxruntime between them, in file order, as the proof above did"
        if host
        else "nothing runs on the host"
    )
    return [
        *lines,
        f"next: give the DFC each device segment: {command('dfc', first, '--out', first.with_suffix('.dfc.json'))}"
        f"{others} (or the whole graph with --start-node-names/--end-node-names as listed above and in "
        f"{Path(out) / 'partition.json'}); {host_step}",
    ]


def probes_closing(pack: ProbePack) -> list[str]:
    """`probes`' totals by subject kind and the next step: the DFC over the pack, then `evidence`."""
    ops = sum(p.subject == Subject.OP for p in pack.probes)
    return [
        f"totals: {len(pack.probes)} probe(s), each one unjudged subject ({ops} op(s), {len(pack.probes) - ops} "
        f"rule(s)); {len(pack.unbuilt)} subject(s) not probed",
        f"next: bash {shlex.quote(str(pack.script))} where Docker and {image()} are ({IMAGE_HOWTO}), then "
        f"{command('evidence', pack.folder)}",
    ]


def evidence_closing(rows: Sequence[dict], diff: str, folder: str) -> list[str]:
    """`evidence`'s totals by what each probe's result found and the next step."""
    found: dict[str, int] = {}
    for row in rows:
        head = str(row["finding"]).split(":")[0].split(" (")[0]
        found[head] = found.get(head, 0) + 1
    lines = [f"totals: {len(rows)} probe(s): " + ", ".join(f"{k} x{n}" for k, n in found.items())]
    if diff:
        return [*lines, "next: make the edit above to params/device_ops.yaml, then run `device` on your graph again"]
    if found.get("no DFC result yet") == len(rows):
        script = shlex.quote(str(Path(folder) / "run_dfc.sh"))
        return [*lines, f"next: bash {script} where Docker and {image()} are ({IMAGE_HOWTO}), then evidence again"]
    return [
        *lines,
        "next: nothing to edit; what stays unjudged waits on a DFC run of a whole graph (`dfc`, then `pair`)",
    ]


def dfc_closing(result: DfcResult, model: str, out: str | None) -> list[str]:
    """`dfc`'s totals (the DFC's errors by class and op) and the next step: pairing the result with the gate."""
    classes: dict[str, int] = {}
    ops: dict[str, int] = {}
    for e in result.errors:
        classes[e.cls] = classes.get(e.cls, 0) + 1
        if e.op:
            ops[e.op] = ops.get(e.op, 0) + 1
    total = f"totals: DFC {result.verdict}, {len(result.errors)} error(s)"
    if classes:
        total += " by class " + ", ".join(f"{k} x{n}" for k, n in classes.items())
    if ops:
        total += "; by op " + ", ".join(f"{k} x{n}" for k, n in ops.items())
    if out is None:
        then = f"rerun with --out {beside(model, '.dfc.json')}, then {command('pair', model, '--dfc', beside(model, '.dfc.json'))}"
    else:
        then = command("pair", model, "--dfc", out)
    return [total, f"next: {then}  (the gate against the DFC, cause by cause)"]


def dfc_missing_lines(model: str, out: str | None) -> list[str]:
    """Where no DFC is installed: which image the commands above need, where to get it, whether the target DFC
    takes the graph's opset, and the step after the parse."""
    result = out or beside(model, ".dfc.json")
    return [
        *image_lines(model),
        "the first command runs this checkout's weftlib in the image, which then also needs numpy, onnx, "
        "onnxscript and pydantic there; the DFC's own CLI needs only the DFC",
        f"next: run a command above where Docker and the image are, then {command('pair', model, '--dfc', result)} "
        f"(or --dfc {beside(model, '.dfc.log')} after the DFC's own CLI)",
    ]


def pair_closing(result: Pairing, gate: GateResult, model: str) -> list[str]:
    """`pair`'s totals (the gate's, and the edits by action) and the next step its verdict asks for."""
    lines = gate_totals(gate)
    if result.edits:
        by_action: dict[str, list[str]] = {}
        for e in result.edits:
            by_action.setdefault(e.action, []).append(e.op)
        lines.append("  edits: " + "; ".join(f"{a} x{len(o)} ({', '.join(o)})" for a, o in by_action.items()))
    nexts = {
        PairVerdict.NOT_RUN: command("dfc", model, "--out", beside(model, ".dfc.json")),
        PairVerdict.HELD: "none in the loop: the record held on this graph (the DFC's optimize and compile are next)",
        PairVerdict.BOTH_REJECT: f"{command('fix', model, '--out', beside(model, '_fix'))}, or "
        f"{command('partition', model, '--out', beside(model, '_cut'))} to keep the refusals on the host",
        PairVerdict.UNRECOGNISED: f"{command('dfc', model, '--out', beside(model, '.dfc.json'))} for a result the reader knows",
    }
    step = nexts.get(
        result.verdict,
        "make the edits above to params/device_ops.yaml, then run `device` on the graph again"
        if result.edits
        else "read the DFC's first error in its log: it stopped before it judged the ops",
    )
    return [*lines, f"next: {step}"]


def print_lines(lines: Sequence[str], *, stderr: bool = False) -> None:
    """The closing lines after what the command printed, on stdout (stderr beside an exit-2 message)."""
    for line in lines:
        print(line, file=sys.stderr if stderr else sys.stdout)
