"""Tables and the op-matrix plot notebook 04 publishes, built from gate results and pairings.

The notebook may not loop, so gathering the graphs, collecting DFC results by file stem and shaping the
tables lives here, where it is tested.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

from .allowlist import DeviceOps
from .device import GateResult, device_gate
from .dfc_log import DfcResult, load_dfc_result
from .dfc_runner import dfc_available, docker_command, image, run_dfc
from .pairing import Pairing

if TYPE_CHECKING:
    import pandas as pd

    from .probes import DfcPack

STATUS_COLOURS = {"allowed": "#4caf50", "condition broken": "#ff9800", "blocker": "#e53935", "unlisted": "#9e9e9e"}
RESULT_SUFFIXES = (".json", ".log", ".txt")


def find_models(folders: Iterable[str | os.PathLike]) -> list[Path]:
    """Every `*.onnx` under the given folders (recursively, sorted); missing folders contribute nothing."""
    found: list[Path] = []
    for folder in map(Path, folders):
        if folder.is_dir():
            found += sorted(p for p in folder.rglob("*.onnx") if p.is_file())
    return found


def gate_all(models: Sequence[Path], ops: DeviceOps) -> dict[Path, GateResult]:
    """The device gate over each model (a progress bar when someone is watching)."""
    from ..console import progress as tqdm

    from ..console import headless

    return {m: device_gate(m, ops) for m in tqdm(models, desc="device gate", disable=headless() or len(models) < 4)}


def gate_table(results: dict[Path, GateResult], root: str | os.PathLike) -> "pd.DataFrame":
    import pandas as pd

    rows = [
        {
            "model": _label(path, root),
            "gate": "PASS" if r.passed else "FAIL",
            "readable": "yes" if r.readable else "no (inputs not rank 4)",
            "nodes": r.nodes,
            "ir": r.ir_version,
            "opset": r.opset,
            "torch vs onnxruntime": (
                f"{r.parity['max_abs_diff']:.2g} (within {r.parity['atol']:.0e})" if r.parity else "no export check"
            ),
            "ops outside": ", ".join(f"{op} x{u.count}" for op, u in r.outside.items()),
            "conditions broken": ", ".join(sorted({f"{c.op} ({c.condition})" for c in r.conditions})),
            "problems": len(r.problems),
        }
        for path, r in results.items()
    ]
    return pd.DataFrame(rows)


def _label(path: Path, root: str | os.PathLike) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return Path(path).name


def result_files(results_dir: str | os.PathLike) -> dict[str, Path]:
    """DFC result files in `results_dir` keyed by the model stem they are for (`<stem>.dfc.json`, `<stem>.log`).

    JSON wins over a raw log for the same stem.
    """
    files: dict[str, Path] = {}
    for path in sorted(Path(results_dir).iterdir(), key=lambda p: (p.suffix != ".json", p.name)):
        if path.is_file() and path.suffix.lower() in RESULT_SUFFIXES:
            stem = path.name[: -len(path.suffix)]
            stem = stem[: -len(".dfc")] if stem.endswith(".dfc") else stem
            files.setdefault(stem, path)
    return files


def collect_dfc(models: Sequence[Path], results_dir: str, arch: str) -> tuple[dict[Path, DfcResult | None], str]:
    """DFC results per model: from `results_dir` (matched by stem), else from the parser, else None.

    Returns the results and how they were obtained ("results_dir", "parser" or "not run").
    """
    if results_dir:
        if not Path(results_dir).is_dir():
            raise FileNotFoundError(f"dfc_results_dir: {results_dir} is not a folder")
        files = result_files(results_dir)
        return {m: load_dfc_result(files[m.stem]) if m.stem in files else None for m in models}, "results_dir"
    if dfc_available()[0]:
        return {m: _run_safely(m, arch) for m in models}, "parser"
    return {m: None for m in models}, "not run"


def _run_safely(model: Path, arch: str) -> DfcResult:
    try:
        return run_dfc(model, arch)
    except Exception as exc:  # a crash of the tooling is not a verdict on the graph
        return DfcResult("unrecognised", reason=f"running the parser failed: {type(exc).__name__}: {exc}")


def commands_table(models: Sequence[Path], arch: str, root: str | os.PathLike) -> "pd.DataFrame":
    import pandas as pd

    return pd.DataFrame(
        [{"model": _label(m, root), "run this where Docker runs": docker_command(m, arch)} for m in models]
    )


def pairing_table(pairings: dict[Path, Pairing], root: str | os.PathLike) -> "pd.DataFrame":
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "model": _label(path, root),
                "device gate": p.gate,
                "gate fails on": ", ".join(p.gate_ops),
                "DFC": p.dfc,
                "DFC rejects": ", ".join(p.dfc_ops + p.unresolved_nodes),
                "cause": p.cause,
                "matched": p.matched,
                "verdict": p.verdict,
                "agreement": p.agreement,
                "meaning": p.meaning,
            }
            for path, p in pairings.items()
        ]
    )


def edits_table(pairings: dict[Path, Pairing], evidence: list[dict], root: str | os.PathLike) -> "pd.DataFrame":
    """Suggested DEVICE_OPS edits: from the pairings (DFC verdicts) and from the allowlist's own evidence."""
    import pandas as pd

    rows = [
        {"from": f"pairing: {_label(path, root)}", "action": e.action, "op": e.op, "why": e.reason}
        for path, p in pairings.items()
        for e in p.edits
    ]
    for row in evidence:
        if row["status"] == "contradicted":
            action = "move out" if row["listed"] == "device_ops" else "move in"
            rows.append(
                {
                    "from": "evidence",
                    "action": action,
                    "op": row["op"],
                    "why": "its only on-target evidence says the opposite of its listing",
                }
            )
        elif row["status"] == "documented otherwise":
            rows.append(
                {
                    "from": "evidence",
                    "action": "review",
                    "op": row["op"],
                    "why": "a vendor table lists it, yet it is a known blocker here and nothing was observed "
                    "on the target: a probe decides",
                }
            )
        elif row["status"] == "contested":
            rows.append(
                {
                    "from": "evidence",
                    "action": "review",
                    "op": row["op"],
                    "why": f"{row['for']} observation(s) back its listing, {row['against']} contradict it: "
                    "the op parses in some shapes only (a `condition` may capture it)",
                }
            )
    return pd.DataFrame(rows, columns=["from", "action", "op", "why"])


def op_matrix(
    results: dict[Path, GateResult], ops: DeviceOps, root: str | os.PathLike
) -> tuple["pd.DataFrame", "pd.DataFrame"]:
    """Model x op counts, and the allowlist status of each non-empty cell."""
    import pandas as pd

    names = sorted({op for r in results.values() for op in r.ops})
    counts = pd.DataFrame(
        [[r.ops.get(op, 0) for op in names] for r in results.values()],
        index=[_label(p, root) for p in results],
        columns=names,
        dtype=int,
    )
    status = pd.DataFrame(
        [[_cell_status(r, op, ops) if r.ops.get(op) else "" for op in names] for r in results.values()],
        index=counts.index,
        columns=names,
    )
    return counts, status


def _cell_status(result: GateResult, op: str, ops: DeviceOps) -> str:
    if any(c.op == op for c in result.conditions):
        return "condition broken"
    return ops.status(op) if op in ops.entries else "unlisted"


def plot_op_matrix(counts: "pd.DataFrame", status: "pd.DataFrame"):
    """A heat-map-like grid: one row per model, one column per op, coloured by allowlist status."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgb
    from matplotlib.patches import Patch

    rows, cols = counts.shape
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * cols + 2), max(2.0, 0.45 * rows + 1.5)))
    image = [[to_rgb(STATUS_COLOURS.get(status.iat[i, j], "#ffffff")) for j in range(cols)] for i in range(rows)]
    ax.imshow(image, aspect="auto")
    for (i, j), n in ((ij, counts.iat[ij]) for ij in ((i, j) for i in range(rows) for j in range(cols))):
        if n:
            ax.text(j, i, str(n), ha="center", va="center", fontsize=7)
    ax.set_xticks(range(cols), counts.columns, rotation=90, fontsize=8)
    ax.set_yticks(range(rows), counts.index, fontsize=8)
    ax.set_title("ONNX ops per exported graph, coloured by DEVICE_OPS status (numbers: node count)")
    ax.legend(
        handles=[Patch(color=c, label=s) for s, c in STATUS_COLOURS.items()],
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=8,
    )
    return fig


def missing_outputs(folders: dict[str, Path]) -> list[str]:
    """Which listed notebooks left no outputs to gate: no `metrics.json` (it failed or did not run), or no
    `.onnx` file. Notebook 04 stops on any, instead of passing on a subset of the graphs."""
    missing = []
    for name, folder in folders.items():
        metrics = Path(folder) / "metrics.json"
        if not metrics.is_file():
            missing.append(f"{name}: no metrics.json in {folder} (the notebook failed or did not run in this run)")
        elif "conclusion" not in json.loads(metrics.read_text()).get("metrics", {}):
            # a notebook records its conclusion last: without it, it stopped part-way and its graphs are a subset
            missing.append(f"{name}: recorded no conclusion in {metrics} (the notebook stopped part-way)")
        elif not find_models([folder]):
            missing.append(f"{name}: no .onnx graph under {folder}")
    return missing


def pack_models(models: Sequence[Path], folder: str | os.PathLike, arch: str) -> tuple["DfcPack", list[Path]]:
    """Copy every graph (with its parity file) into one DFC pack folder; the copies are what gets gated and
    paired, so the graph, its result file and the DFC's model name all share one stem."""
    from .probes import write_dfc_pack

    root = Path(os.path.commonpath([Path(m).resolve().parent for m in models])).parent if models else Path(".")
    sources = {Path(m).name: _label(Path(m).resolve(), root) for m in models}  # relative: the pack stays copyable
    pack = write_dfc_pack(models, folder, arch, extra={"sources": sources})
    return pack, [pack.folder / name for name in pack.graphs]


def standing_table(
    results: dict[Path, GateResult], pairings: dict[Path, Pairing], root: str | os.PathLike
) -> "pd.DataFrame":
    """Per graph: readable by the parser, the ops outside DEVICE_OPS, and whether its verdict rests on the DFC
    or only on the allowlist."""
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "graph": _label(path, root),
                "readable": "yes" if r.readable else "no",
                "ops outside DEVICE_OPS": ", ".join(r.failing_ops) or "none",
                "device gate": "PASS" if r.passed else "FAIL",
                "DFC": pairings[path].dfc,
                "verdict": pairings[path].verdict,
                "rests on": "DFC" if pairings[path].judged else "allowlist only",
            }
            for path, r in results.items()
        ],
        columns=["graph", "readable", "ops outside DEVICE_OPS", "device gate", "DFC", "verdict", "rests on"],
    )


def conclusion(
    results: dict[Path, GateResult],
    pairings: dict[Path, Pairing],
    dfc_source: str,
    script: str | os.PathLike,
    run_dir: str | os.PathLike | None = None,
) -> tuple[str, dict[str, str], list[str]]:
    """Notebook 04's answer sentence, what it rests on, and its unmet preconditions, from measured values.

    With `run_dir`, the DFC script is named relative to it: the run folder is copied to the published
    appendix, so the command stays right there and names no machine's path."""
    judged = [p for p in pairings.values() if p.judged]
    unjudged = len(pairings) - len(judged)
    outside = sorted({op for r in results.values() for op in r.failing_ops})
    unreadable = sum(not r.readable for r in results.values())
    rejected = sorted({op for p in judged for op in p.dfc_ops})
    answer = (
        f"{len(results)} graphs gated: {sum(r.passed for r in results.values())} pass the device gate, "
        f"{unreadable} have inputs the DFC's parser cannot read (not rank 4); ops outside DEVICE_OPS: "
        f"{', '.join(outside) or 'none'}. {len(judged)} verdicts rest on the DFC"
        + (f" (it rejected {', '.join(rejected)})" if rejected else "")
        + f", {unjudged} on the allowlist only (unjudged)."
    )
    rests_on = {"dfc": "run" if dfc_source != "not run" and judged else "not run", "sources": "stand-in"}
    unmet = []
    if dfc_source == "not run":
        command = (  # the run folder is what the appendix copies: name the script inside it
            f"`bash {script}`" if run_dir is None else f"`bash {os.path.relpath(script, run_dir)}` in the run folder"
        )
        unmet.append(
            f"DFC not run here: needs the {image()} image; run {command} and "
            f"rerun 04 with dfc_results_dir set to its folder ({unjudged} graphs unjudged)"
        )
    elif unjudged:
        unmet.append(f"{unjudged} of {len(pairings)} graphs have no DFC verdict on their ops (see the pairing)")
    return answer, rests_on, unmet
