"""One DFC session judges every unjudged op: the DFC pack, the probes, and reading their results back.

A *DFC pack* is a folder holding ONNX graphs, a `manifest.json`, a `run_dfc.sh` that parses every graph in
the target DFC's image (`dfc_runner.image()`) and writes `<stem>.dfc.json` beside it, and `dfc_tool/`, the two files
of this package the parse needs. Every path in the script is relative to the folder, so the folder can be
copied to wherever Docker and the image are, run there, and copied back.

A *probe* is the smallest graph that asks the DFC about one op: a rank-4 input, a 1x1 `Conv`, the op, a 1x1
`Conv` (so the compiler can neither absorb the op into the graph's edge nor lose it), every node named,
`onnx.checker`-clean and run once in onnxruntime before it is written (weftspun/rf-detr-cpp
scripts/gen_op_tests.py records why: an unnamed or unwrapped op reads like a refusal when it is not).
`evidence_diff` turns the DFC's results on the probes into the edit to `params/device_ops.yaml`.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .allowlist import DEFAULT_PATH, DeviceOps, load_device_ops
from .dfc_log import DfcResult, failure_cause, load_dfc_result
from .dfc_runner import check_arch, default_arch, image
from ..onnx_core.walk import WRITTEN_IR_VERSION, WRITTEN_OPSET
from .evidence import UNJUDGED_STATUSES, evidence_table

MANIFEST = "manifest.json"
SCRIPT = "run_dfc.sh"
TOOL = "dfc_tool"
PACK_KIND = "weftlib.gate/dfc-pack"
C, H, W = 8, 8, 8  # the probe input [1, C, H, W]: small, image-shaped, H == W so a transpose keeps the shape


@dataclass(frozen=True)
class DfcPack:
    """A folder of graphs with the one script that parses all of them and the manifest that lists them."""

    folder: Path
    script: Path
    manifest: Path
    graphs: tuple[str, ...]  # file names, relative to `folder`
    arch: str = field(default_factory=default_arch)

    @property
    def command(self) -> str:
        """What to run where Docker and the image are (from anywhere: the script finds its own folder)."""
        return f"bash {shlex.quote(str(self.script))}"


@dataclass(frozen=True)
class Probe:
    """One probe graph: the op it asks about, under which variant of its condition, and why it is asked."""

    op: str
    file: str
    why: str
    variant: str = ""  # "" or e.g. "condition met" / "condition broken"
    condition_met: bool | None = None
    note: str = ""

    @property
    def stem(self) -> str:
        return Path(self.file).stem


@dataclass(frozen=True)
class ProbePack:
    """The probes written, the ops that could not be built (named, never dropped), and their DFC pack."""

    pack: DfcPack
    probes: tuple[Probe, ...]
    unbuilt: dict[str, str] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        return self.pack.folder

    @property
    def script(self) -> Path:
        return self.pack.script


# --------------------------------------------------------------------------------------------- the pack


def write_dfc_pack(
    models: Sequence[str | os.PathLike],
    folder: str | os.PathLike,
    arch: str | None = None,
    *,
    extra: dict[str, Any] | None = None,
) -> DfcPack:
    """Copy `models` (and their `.parity.json`) into `folder` and write the script, the tool and the manifest.

    A model already inside `folder` stays where it is. Stems must be unique (the DFC names results by stem).
    `arch` defaults to the allowlist's target arch.
    """
    arch = check_arch(arch or default_arch())
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    names: list[str] = []
    for model in map(Path, models):
        if not model.is_file():
            raise FileNotFoundError(f"models: {model} does not exist")
        target = folder / model.name
        if target.name in names:
            raise ValueError(f"models: two graphs are named {model.name}; the DFC names its results by stem")
        if model.resolve() != target.resolve():
            shutil.copyfile(model, target)
            parity = model.with_suffix(".parity.json")
            if parity.is_file():
                shutil.copyfile(parity, target.with_suffix(".parity.json"))
        names.append(target.name)
    _write_tool(folder / TOOL)
    script = folder / SCRIPT
    script.write_text(script_text(names, arch))
    script.chmod(0o755)
    manifest = folder / MANIFEST
    manifest.write_text(
        json.dumps(
            {"kind": PACK_KIND, "image": image(), "arch": arch, "script": SCRIPT, "graphs": names, **(extra or {})},
            indent=2,
        )
    )
    return DfcPack(folder=folder, script=script, manifest=manifest, graphs=tuple(names), arch=arch)


def script_text(graphs: Sequence[str], arch: str) -> str:
    """The bash script: one `docker run` per graph, everything relative to the script's own folder."""
    dfc_image = image()
    lines = [
        "#!/usr/bin/env bash",
        f"# Parse every graph of this folder with the Hailo DFC in {dfc_image} ({arch}); each result lands",
        "# beside its graph as <stem>.dfc.json. Copy the whole folder anywhere Docker and the image are.",
        "# Then: python -m weftlib.gate evidence <this folder>  (probes), or notebook 04 with",
        "# dfc_results_dir set to this folder.",
        "set -u",
        'HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"',
        "status=0",
    ]
    for name in graphs:
        stem = Path(name).stem
        inner = [
            "python",
            "-m",
            "weftlib.gate.dfc_runner",
            f"/pack/{name}",
            "--arch",
            arch,
            "--out",
            f"/pack/{stem}.dfc.json",
        ]
        lines.append(
            f'docker run --rm -v "$HERE:/pack" -e PYTHONPATH=/pack/{TOOL} -w /pack {dfc_image} '
            f"{shlex.join(inner)} || status=1"
        )
    lines.append('exit "$status"')
    return "\n".join(lines) + "\n"


def _write_tool(tool: Path) -> None:
    """The parse's own code, and nothing else: a package whose `gate/__init__` imports nothing heavy."""
    here = Path(__file__).resolve().parent
    (tool / "weftlib" / "gate").mkdir(parents=True, exist_ok=True)
    (tool / "weftlib" / "__init__.py").write_text('"""The DFC parse only (copied from weftlib)."""\n')
    (tool / "weftlib" / "gate" / "__init__.py").write_text("")
    for name in ("dfc_runner.py", "dfc_log.py"):
        shutil.copyfile(here / name, tool / "weftlib" / "gate" / name)


def read_pack(folder: str | os.PathLike) -> dict[str, Any]:
    """The manifest of a pack folder; a clear error when the folder is not one."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: not a folder")
    path = folder / MANIFEST
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(
            f"{folder}: no readable {MANIFEST} ({exc}); write the pack with `python -m weftlib.gate probes --out DIR`"
        ) from exc
    if data.get("kind") != PACK_KIND:
        raise ValueError(f"{path}: not a DFC pack manifest")
    return data


def results_in(folder: str | os.PathLike, stems: Iterable[str]) -> dict[str, DfcResult]:
    """The DFC result files (`<stem>.dfc.json`, else `<stem>.dfc.log`) found for `stems` in `folder`."""
    folder = Path(folder)
    found = {}
    for stem in stems:
        for name in (f"{stem}.dfc.json", f"{stem}.dfc.log"):
            if (folder / name).is_file():
                found[stem] = load_dfc_result(folder / name)
                break
    return found


# -------------------------------------------------------------------------------------------- probes

Builder = Callable[[], "tuple[list[onnx.NodeProto], list[onnx.TensorProto], int, str]"]


def _c(name: str, values: Any, dtype: Any = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, dtype=dtype), name)


def _node(op: str, inputs: list[str], output: str = "b", **attrs: Any) -> onnx.NodeProto:
    return helper.make_node(op, inputs, [output], name=f"probe/{op}", **attrs)


def _unary(op: str, **attrs: Any) -> Builder:
    return lambda: ([_node(op, ["a"], **attrs)], [], C, "")


def _binary(op: str, value: float = 1.5) -> Builder:
    return lambda: ([_node(op, ["a", "k"])], [_c("k", np.full((1, C, 1, 1), value))], C, "")


def _reduce(op: str) -> Builder:
    if op == "ReduceSum":  # axes is an input from opset 13
        return lambda: (
            [_node(op, ["a", "axes"], keepdims=1)],
            [_c("axes", [1], np.int64)],
            1,
            "over the features axis, keepdims=1",
        )
    return lambda: ([_node(op, ["a"], axes=[1], keepdims=1)], [], 1, "over the features axis, keepdims=1")


def _gather(constant: bool) -> Builder:
    if constant:
        return lambda: (
            [_node("Gather", ["a", "idx"], axis=1)],
            [_c("idx", [0, 2, 4, 6], np.int64)],
            4,
            "constant index",
        )
    nodes = [
        helper.make_node("ArgMax", ["a"], ["i"], name="probe/ArgMax", axis=1, keepdims=0),
        helper.make_node("Reshape", ["i", "shp"], ["i1"], name="probe/index_Reshape"),
        _node("Gather", ["a", "i1"], axis=1),
    ]
    return lambda: (
        nodes,
        [_c("shp", [-1], np.int64)],
        H * W,
        "index computed from the input by ArgMax (the probe also carries ArgMax and a Reshape)",
    )


def _gelu_erf(pattern: bool) -> Builder:
    if not pattern:
        return _unary("Erf")
    nodes = [
        helper.make_node("Div", ["a", "sqrt2"], ["d"], name="probe/gelu_Div"),
        _node("Erf", ["d"], "e"),
        helper.make_node("Add", ["e", "one"], ["e1"], name="probe/gelu_Add"),
        helper.make_node("Mul", ["a", "e1"], ["g"], name="probe/gelu_Mul"),
        helper.make_node("Mul", ["g", "half"], ["b"], name="probe/gelu_Mul_1"),
    ]
    return lambda: (nodes, [_c("sqrt2", 2**0.5), _c("one", 1.0), _c("half", 0.5)], C, "inside an exact GELU")


def _builders() -> dict[tuple[str, str], Builder]:
    """(op, variant) -> builder. Each returns (nodes making "b" from "a", initializers, channels of b, note)."""
    b: dict[tuple[str, str], Builder] = {}
    for op in (
        "Relu",
        "Sigmoid",
        "Tanh",
        "Exp",
        "Sin",
        "Cos",
        "Abs",
        "Neg",
        "Identity",
        "Softplus",
        "Softsign",
        "Elu",
        "LeakyRelu",
        "HardSigmoid",
        "Floor",
        "Ceil",
        "Round",
    ):
        b[(op, "")] = _unary(op)
    for op in ("Sqrt", "Log", "Reciprocal"):  # kept inside their domain by an Abs and a constant offset
        b[(op, "")] = lambda op=op: (
            [
                helper.make_node("Abs", ["a"], ["p"], name="probe/domain_Abs"),
                helper.make_node("Add", ["p", "eps"], ["q"], name="probe/domain_Add"),
                _node(op, ["q"]),
            ],
            [_c("eps", 0.5)],
            C,
            "after Abs + 0.5 (its domain)",
        )
    b[("Cast", "")] = lambda: (
        [
            helper.make_node("Cast", ["a"], ["s"], name="probe/Cast", to=TensorProto.INT32),
            helper.make_node("Cast", ["s"], ["b"], name="probe/Cast_back", to=TensorProto.FLOAT),
        ],
        [],
        C,
        "f32 -> s32 -> f32, the round trip the DFC was seen not to perform",
    )
    for op in ("Add", "Sub", "Mul", "Div", "Max", "Min"):
        b[(op, "")] = _binary(op)
    b[("Pow", "")] = _binary("Pow", 2.0)
    b[("Mod", "")] = lambda: ([_node("Mod", ["a", "k"], fmod=1)], [_c("k", np.full((1, C, 1, 1), 1.5))], C, "fmod=1")
    b[("Clip", "")] = lambda: ([_node("Clip", ["a", "lo", "hi"])], [_c("lo", -1.0), _c("hi", 1.0)], C, "")
    for op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceSumSquare"):
        b[(op, "")] = _reduce(op)
    b[("Softmax", "condition met")] = lambda: ([_node("Softmax", ["a"], axis=-1)], [], C, "over the last axis")
    b[("Softmax", "condition broken")] = lambda: ([_node("Softmax", ["a"], axis=1)], [], C, "over axis 1")
    b[("Erf", "condition met")] = _gelu_erf(True)
    b[("Erf", "condition broken")] = _gelu_erf(False)
    b[("Gather", "condition met")] = _gather(True)
    b[("Gather", "condition broken")] = _gather(False)
    b[("Transpose", "")] = lambda: ([_node("Transpose", ["a"], perm=[0, 1, 3, 2])], [], C, "swaps H and W")
    b[("Reshape", "")] = lambda: (
        [_node("Reshape", ["a", "shp"])],
        [_c("shp", [1, 2 * C, H // 2, W], np.int64)],
        2 * C,
        "a view: [1,C,H,W] -> [1,2C,H/2,W]",
    )
    b[("Flatten", "")] = lambda: (
        [
            _node("Flatten", ["a"], "f", axis=1),
            helper.make_node("Reshape", ["f", "shp"], ["b"], name="probe/back_Reshape"),
        ],
        [_c("shp", [1, C, H, W], np.int64)],
        C,
        "then a Reshape back to rank 4",
    )
    b[("Unsqueeze", "")] = lambda: (
        [_node("Unsqueeze", ["a", "ax"], "u"), helper.make_node("Squeeze", ["u", "ax"], ["b"], name="probe/Squeeze")],
        [_c("ax", [4], np.int64)],
        C,
        "Unsqueeze then Squeeze on a new last axis",
    )
    b[("Squeeze", "")] = b[("Unsqueeze", "")]
    b[("Concat", "")] = lambda: (
        [_node("Concat", ["a", "k"], axis=1)],
        [_c("k", np.ones((1, C, H, W)))],
        2 * C,
        "with a constant, over channels",
    )
    b[("Split", "")] = lambda: (
        [helper.make_node("Split", ["a", "sp"], ["b", "b2"], name="probe/Split", axis=1)],
        [_c("sp", [C // 2, C // 2], np.int64)],
        C // 2,
        "the second half is a graph output",
    )
    b[("Slice", "")] = lambda: (
        [_node("Slice", ["a", "st", "en", "ax"])],
        [_c("st", [0], np.int64), _c("en", [C // 2], np.int64), _c("ax", [1], np.int64)],
        C // 2,
        "over channels",
    )
    b[("Pad", "")] = lambda: (
        [_node("Pad", ["a", "pads"], mode="constant")],
        [_c("pads", [0, 0, 1, 1, 0, 0, 1, 1], np.int64)],
        C,
        "constant, 1 pixel",
    )
    b[("Resize", "")] = lambda: (
        [_node("Resize", ["a", "", "scales"], mode="nearest")],
        [_c("scales", [1, 1, 2, 2])],
        C,
        "nearest, x2",
    )
    b[("MatMul", "")] = lambda: ([_node("MatMul", ["a", "a"])], [], C, "two activation inputs")
    b[("LayerNormalization", "")] = lambda: (
        [_node("LayerNormalization", ["a", "s", "z"], axis=-1)],
        [_c("s", np.ones(W)), _c("z", np.zeros(W))],
        C,
        "over the last axis",
    )
    b[("AveragePool", "")] = lambda: (
        [_node("AveragePool", ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
        [],
        C,
        "3x3, stride 1",
    )
    b[("MaxPool", "")] = lambda: (
        [_node("MaxPool", ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
        [],
        C,
        "3x3, stride 1",
    )
    b[("Conv", "")] = lambda: (
        [_node("Conv", ["a", "w"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
        [_c("w", np.full((C, C, 3, 3), 0.01))],
        C,
        "3x3",
    )
    b[("Constant", "")] = lambda: (
        [
            helper.make_node("Constant", [], ["k"], name="probe/Constant", value=_c("kv", np.ones((1, C, 1, 1)))),
            helper.make_node("Add", ["a", "k"], ["b"], name="probe/const_Add"),
        ],
        [],
        C,
        "feeding an Add",
    )
    b[("Expand", "")] = lambda: (
        [
            helper.make_node("ReduceMean", ["a"], ["m"], name="probe/pre_ReduceMean", axes=[1], keepdims=1),
            _node("Expand", ["m", "shp"]),
        ],
        [_c("shp", [1, C, H, W], np.int64)],
        C,
        "[1,1,H,W] -> [1,C,H,W] (after a ReduceMean)",
    )
    b[("Tile", "")] = lambda: (
        [_node("Tile", ["a", "rep"])],
        [_c("rep", [1, 2, 1, 1], np.int64)],
        2 * C,
        "over channels",
    )
    return b


BUILDERS = _builders()


def probe_model(op: str, variant: str = "") -> tuple[onnx.ModelProto, str]:
    """The probe for `op` (a KeyError when there is no builder): pre Conv -> op -> post Conv, all named."""
    nodes, inits, channels, note = BUILDERS[(op, variant)]()
    rng = np.random.default_rng(0)
    pre = helper.make_node("Conv", ["x", "probe_w_pre"], ["a"], name="probe/pre_Conv", kernel_shape=[1, 1])
    post = helper.make_node("Conv", ["b", "probe_w_post"], ["y"], name="probe/post_Conv", kernel_shape=[1, 1])
    weights = [
        _c("probe_w_pre", rng.standard_normal((C, C, 1, 1)) / C),
        _c("probe_w_post", rng.standard_normal((4, channels, 1, 1)) / channels),
    ]
    extra_out = [helper.make_tensor_value_info("b2", TensorProto.FLOAT, None)] if op == "Split" else []
    graph = helper.make_graph(
        [pre, *nodes, post],
        f"probe_{op}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, W])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None), *extra_out],
        initializer=[*weights, *inits],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", WRITTEN_OPSET)], producer_name="weftlib.gate"
    )
    model.ir_version = WRITTEN_IR_VERSION
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    for out in model.graph.output:  # shapes filled in by inference must be static
        if out.type.tensor_type.shape.dim.__len__() == 0:
            raise ValueError(f"probe {op}: output {out.name} has no inferred shape")
    return model, note


def _proven(model: onnx.ModelProto, path: Path) -> None:
    """Checker-clean and run once in onnxruntime, or an error: a broken probe would read as a refusal."""
    import onnxruntime as ort

    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    outs = session.run(None, {"x": np.random.default_rng(1).standard_normal((1, C, H, W)).astype(np.float32)})
    if not all(np.isfinite(o).all() for o in outs):
        raise ValueError("non-finite output in onnxruntime")


def ops_to_probe(ops: DeviceOps, extra: Iterable[str] = ()) -> dict[str, str]:
    """op -> why: every listed op whose standing is not an on-target observation, plus `extra` ops."""
    why = {row["op"]: f"standing: {row['status']}" for row in evidence_table(ops) if row["status"] in UNJUDGED_STATUSES}
    for op in extra:
        status = ops.status(op)
        why.setdefault(op, "used by an export" + ("" if status == "allowed" else f" ({status})"))
    return dict(sorted(why.items()))


def write_probes(
    out: str | os.PathLike, ops: DeviceOps | None = None, *, extra: Iterable[str] = (), arch: str | None = None
) -> ProbePack:
    """Write one proven probe per unjudged op (two for an op with a condition: met and broken) and the pack."""
    ops = ops if ops is not None else load_device_ops()
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    probes, unbuilt = [], {}
    for op, why in ops_to_probe(ops, extra).items():
        variants = [v for (o, v) in BUILDERS if o == op]
        if not variants:
            unbuilt[op] = "no probe builder (named, not dropped): " + why
            continue
        for variant in variants:
            file = f"probe_{op}" + (f"_{variant.split()[-1]}" if variant else "") + ".onnx"
            try:
                model, note = probe_model(op, variant)
                _proven(model, folder / file)
            except Exception as exc:  # a probe that does not prove itself is never handed to the DFC
                (folder / file).unlink(missing_ok=True)
                unbuilt[f"{op} {variant}".strip()] = f"probe not proven: {type(exc).__name__}: {exc}"
                continue
            met = None if not variant else variant == "condition met"
            probes.append(Probe(op=op, file=file, why=why, variant=variant, condition_met=met, note=note))
    pack = write_dfc_pack(
        [folder / p.file for p in probes],
        folder,
        arch,
        extra={"probes": [asdict(p) for p in probes], "unbuilt": unbuilt, "allowlist": ops.source},
    )
    return ProbePack(pack=pack, probes=tuple(probes), unbuilt=unbuilt)


# ---------------------------------------------------------------------------------- results -> yaml edit


def probe_finding(probe: Probe, result: DfcResult | None, folder: Path) -> tuple[dict[str, Any] | None, str]:
    """(the evidence item a probe's DFC result adds, or None; what was found). Only an answer about the op
    under test becomes evidence: a failure on the wrapping Convs, before any operator, or inconclusive, not."""
    from ..onnx_core.walk import read_graph
    from .pairing import same_model

    if result is None:
        return None, "no DFC result yet"
    if result.model is not None and not same_model(result.model, probe.stem):
        return None, f"refused: the result is about model {result.model!r}, not {probe.stem!r}"
    where = f"probe {probe.file}" + (f" ({probe.variant})" if probe.variant else "")
    base = {
        "dfc": result.dfc_version or "unknown",
        "arch": result.arch or "unknown",
        "source": f"weftlib.gate probes: {where}, DFC result {probe.stem}.dfc.json",
    }
    if probe.condition_met is not None:
        base["condition_met"] = probe.condition_met
    if result.verdict == "parsed":
        return {"seen": "parsed", **base}, "parsed"
    if result.verdict != "rejected":
        return None, f"unjudged: {result.verdict} ({result.reason})"
    graph, _ = read_graph(folder / probe.file)
    node_ops = graph.node_ops() if graph is not None else {}
    cause = failure_cause(result, node_ops)
    if cause != "operator":
        return None, f"unjudged: {cause} ({result.exception or result.reason})"
    named = {node_ops.get(e.node or "", e.op) or e.op for e in result.errors}
    nodes = {e.node or "" for e in result.errors}
    if probe.op in named or any(n.startswith(f"probe/{probe.op}") for n in nodes):
        return {
            "seen": "rejected",
            **base,
            "note": "; ".join(f"{e.cls}: {e.message}" for e in result.errors)[:300],
        }, "rejected"
    return None, f"unjudged: the DFC rejected {sorted(n for n in named if n)} around the op, not the op"


def evidence_diff(folder: str | os.PathLike, ops_path: str | os.PathLike | None = None) -> tuple[str, list[dict]]:
    """The unified diff to `params/device_ops.yaml` that the probe results in `folder` imply, and one row per
    probe (op, variant, finding, the evidence line added)."""
    folder = Path(folder)
    manifest = read_pack(folder)
    probes = [Probe(**p) for p in manifest.get("probes", [])]
    if not probes:
        raise ValueError(f"{folder}: the manifest lists no probes")
    results = results_in(folder, [p.stem for p in probes])
    path = Path(ops_path) if ops_path else DEFAULT_PATH
    ops = load_device_ops(path)
    text = path.read_text()
    rows, additions = [], {}
    for probe in probes:
        item, finding = probe_finding(probe, results.get(probe.stem), folder)
        if item is not None and probe.op not in ops.entries:
            finding += " (the op is not listed: add it to device_ops or known_blockers with this evidence)"
        elif item is not None:
            additions.setdefault(probe.op, []).append(item)
        rows.append(
            {"op": probe.op, "variant": probe.variant, "finding": finding, "evidence": _flow(item) if item else ""}
        )
    new = text
    for op, items in additions.items():
        new = _add_evidence(new, op, items, ops)
    diff = "".join(
        difflib.unified_diff(
            text.splitlines(True), new.splitlines(True), fromfile=str(path), tofile=f"{path} (with the probe results)"
        )
    )
    return diff, rows


def _flow(item: dict[str, Any]) -> str:
    return (
        "{"
        + ", ".join(f"{k}: {json.dumps(v) if isinstance(v, str) else str(v).lower()}" for k, v in item.items())
        + "}"
    )


def _add_evidence(text: str, op: str, items: list[dict[str, Any]], ops: DeviceOps) -> str:
    """Rewrite op's block in the YAML text with the new evidence lines appended (comments elsewhere kept)."""
    lines = text.splitlines(True)
    start = next(i for i, line in enumerate(lines) if line.startswith(f"  {op}:"))
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i].strip() and (len(lines[i]) - len(lines[i].lstrip())) <= 2),
        len(lines),
    )
    entry = ops.entries[op]
    block = [f"  {op}:\n"]
    if entry.note and entry.listed == "known_blockers":
        block.append(f"    reason: {json.dumps(entry.note)}\n")
    elif entry.note:
        block.append(f"    note: {json.dumps(entry.note)}\n")
    if entry.condition:
        block.append(f"    condition: {entry.condition}\n")
    block.append("    evidence:\n")
    old = [e for e in entry.evidence if e.seen != "assumed"]
    for e in old:
        item = {"seen": e.seen, "dfc": e.dfc, "arch": e.arch, "source": e.source}
        if e.condition_met is not None:
            item["condition_met"] = e.condition_met
        if e.note:
            item["note"] = e.note
        block.append(f"      - {_flow(item)}\n")
    block += [f"      - {_flow(item)}\n" for item in items]
    return "".join(lines[:start] + block + lines[end:])
