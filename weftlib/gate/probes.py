"""One DFC session judges every unjudged op and rule: the DFC pack, the probes, and reading their results back.

A *DFC pack* is a folder holding ONNX graphs, a `manifest.json`, a `run_dfc.sh` that parses every graph in
the target DFC's image (`dfc_runner.image()`) and writes `<stem>.dfc.json` beside it, and `dfc_tool/`, the two files
of this package the parse needs. Every path in the script is relative to the folder, so the folder can be
copied to wherever Docker and the image are, run there, and copied back.

A *probe* is the smallest graph that asks the DFC about one op or one graph rule. An op probe is a rank-4
input, a 1x1 `Conv`, the op, a 1x1 `Conv` (so the compiler can neither absorb the op into the graph's edge nor
lose it); a rule probe is the rule's own example graph (`weftlib.gate.rules`). Every node is named, and every
probe is `onnx.checker`-clean and run once in onnxruntime before it is written (weftspun/rf-detr-cpp
scripts/gen_op_tests.py records why: an unnamed or unwrapped op reads like a refusal when it is not).
`evidence_diff` turns the DFC's results on the probes into the edit to `params/device_ops.yaml`.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import json
import os
import shlex
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..onnx_core.walk import WRITTEN_IR_VERSION, WRITTEN_OPSET, index_model, read_graph
from . import rules as R
from .allowlist import DEFAULT_PATH, DeviceOps, load_device_ops
from .dfc_log import DfcResult, failure_cause, load_dfc_result
from .dfc_runner import check_arch, default_arch, image
from .evidence import unjudged
from .graphs import run_once
from .standing import UNJUDGED, op_standing

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
    """One probe graph: the op or rule it asks about (`subject` "op" or "rule"), why, and the nodes of the
    probe that the question is about (a refusal naming any other node is not an answer about it)."""

    subject: str
    name: str
    file: str
    why: str
    nodes: tuple[str, ...] = ()
    note: str = ""

    @property
    def stem(self) -> str:
        return Path(self.file).stem

    @property
    def label(self) -> str:
        return self.name if self.subject == "rule" else f"op {self.name}"


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
    cuts: dict[str, dict[str, Any]] | None = None,
) -> DfcPack:
    """Copy `models` (and their `.parity.json`) into `folder` and write the script, the tool and the manifest.

    A model already inside `folder` stays where it is. Stems must be unique (the DFC names results by stem).
    `arch` defaults to the allowlist's target arch. `cuts`: more parses of the same graphs, each a cut
    (result stem -> {"graph": a file of the pack, "start_node_names", "end_node_names", "net_input_shapes"} as
    `translate_onnx_model` takes them); each cut's result lands as `<result stem>.dfc.json`.
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
            _place(model, target)
            parity = model.with_suffix(".parity.json")
            if parity.is_file():
                shutil.copyfile(parity, target.with_suffix(".parity.json"))
        names.append(target.name)
    _write_tool(folder / TOOL)
    script = folder / SCRIPT
    cuts = cuts or {}
    wanted: set[Any] = {c.get("graph") for c in cuts.values()}  # a cut's fields are read from YAML
    unknown = sorted(wanted - set(names))
    if unknown:
        raise ValueError(f"cuts: graphs {unknown} are not in the pack")
    script.write_text(script_text(names, arch, cuts))
    script.chmod(0o755)
    manifest = folder / MANIFEST
    manifest.write_text(
        json.dumps(
            {
                "kind": PACK_KIND,
                "image": image(),
                "arch": arch,
                "script": SCRIPT,
                "graphs": names,
                "cuts": cuts,
                **(extra or {}),
            },
            indent=2,
        )
    )
    return DfcPack(folder=folder, script=script, manifest=manifest, graphs=tuple(names), arch=arch)


def _place(source: Path, target: Path) -> None:
    """A copy of `source` at `target`: a hard link where the file system allows (large graphs, same disk),
    else a byte copy; either way the pack holds the file itself."""
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def script_text(graphs: Sequence[str], arch: str, cuts: dict[str, dict[str, Any]] | None = None) -> str:
    """The bash script: one `docker run` per graph and per cut, everything relative to the script's own folder."""
    dfc_image = image()
    lines = [
        "#!/usr/bin/env bash",
        f"# Parse every graph of this folder with the Hailo DFC in {dfc_image} ({arch}); each result lands",
        "# beside its graph as <stem>.dfc.json. Copy the whole folder anywhere Docker and the image are.",
        "# Then: python -m weftlib.gate evidence <this folder>  (probes), or notebook 05 with",
        "# dfc_results_dir set to this folder.",
        "set -u",
        'HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"',
        "status=0",
    ]
    parses: list[tuple[str, str, dict[str, Any]]] = [(name, Path(name).stem, {}) for name in graphs]
    parses += [(cut["graph"], stem, cut) for stem, cut in (cuts or {}).items()]
    for name, stem, cut in parses:
        inner = [
            "python",
            "-m",
            "weftlib.gate.dfc_runner",
            f"/pack/{name}",
            "--arch",
            arch,
            "--out",
            f"/pack/{stem}.dfc.json",
            *_translate_options(cut),
        ]
        lines.append(
            f'docker run --rm -v "$HERE:/pack" -e PYTHONPATH=/pack/{TOOL} -w /pack {dfc_image} '
            f"{shlex.join(inner)} || status=1"
        )
    lines.append('exit "$status"')
    return "\n".join(lines) + "\n"


def _translate_options(args: dict[str, Any]) -> list[str]:
    """`dfc_runner` options for a cut: node names and the input shapes, as `translate_onnx_model` takes them."""
    options: list[str] = []
    for key in ("start_node_names", "end_node_names"):
        if args.get(key):
            options += [f"--{key.replace('_', '-')}", *args[key]]
    if args.get("net_input_shapes"):
        options += ["--net-input-shapes", json.dumps(args["net_input_shapes"], separators=(",", ":"))]
    return options


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
    if not isinstance(data, dict) or data.get("kind") != PACK_KIND:
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


# ---------------------------------------------------------------------------------------------- op probes

Builder = Callable[[], "tuple[list[onnx.NodeProto], list[onnx.TensorProto], int, str]"]


def _c(name: str, values: Any, dtype: Any = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, dtype=dtype), name)


def _node(op: str, inputs: list[str], output: str = "b", **attrs: Any) -> onnx.NodeProto:
    return helper.make_node(op, inputs, [output], name=f"probe/{op}", **attrs)


def _unary(op: str, **attrs: Any) -> Builder:
    return lambda: ([_node(op, ["a"], **attrs)], [], C, "")


def _binary(op: str, value: float = 1.5) -> Builder:
    return lambda: ([_node(op, ["a", "k"])], [_c("k", np.full((1, C, 1, 1), value))], C, "")


def _in_domain(op: str) -> Builder:
    """An op kept inside its domain by an Abs and a constant offset (Sqrt, Log, Reciprocal)."""
    return lambda: (
        [
            helper.make_node("Abs", ["a"], ["p"], name="probe/domain_Abs"),
            helper.make_node("Add", ["p", "eps"], ["q"], name="probe/domain_Add"),
            _node(op, ["q"]),
        ],
        [_c("eps", 0.5)],
        C,
        "after Abs + 0.5 (its domain)",
    )


UNARY = (
    "Relu", "Sigmoid", "Tanh", "Exp", "Sin", "Cos", "Abs", "Neg", "Identity", "Softplus", "Softsign", "Elu",
    "LeakyRelu", "HardSigmoid", "Floor", "Ceil", "Round",
)  # fmt: skip
OP_BUILDERS: dict[str, Builder] = {
    **{op: _unary(op) for op in UNARY},
    **{op: _in_domain(op) for op in ("Sqrt", "Log", "Reciprocal")},
    **{op: _binary(op) for op in ("Add", "Sub", "Mul", "Div", "Max", "Min")},
    "Pow": _binary("Pow", 2.0),
    "Mod": lambda: ([_node("Mod", ["a", "k"], fmod=1)], [_c("k", np.full((1, C, 1, 1), 1.5))], C, "fmod=1"),
    "Clip": lambda: ([_node("Clip", ["a", "lo", "hi"])], [_c("lo", -1.0), _c("hi", 1.0)], C, ""),
    "Cast": lambda: (
        [
            helper.make_node("Cast", ["a"], ["s"], name="probe/Cast", to=TensorProto.INT32),
            helper.make_node("Cast", ["s"], ["b"], name="probe/Cast_back", to=TensorProto.FLOAT),
        ],
        [],
        C,
        "f32 -> s32 -> f32, the round trip the DFC was seen not to perform",
    ),
    "ReduceL2": lambda: ([_node("ReduceL2", ["a"], axes=[1], keepdims=1)], [], 1, "over the features axis, keepdims=1"),
    "ReduceSumSquare": lambda: (
        [_node("ReduceSumSquare", ["a"], axes=[1], keepdims=1)],
        [],
        1,
        "over the features axis, keepdims=1",
    ),
    "ReduceMin": lambda: (
        [_node("ReduceMin", ["a"], axes=[1], keepdims=1)],
        [],
        1,
        "over the features axis, keepdims=1",
    ),
    "Transpose": lambda: ([_node("Transpose", ["a"], perm=[0, 1, 3, 2])], [], C, "swaps H and W"),
    "Flatten": lambda: (
        [
            _node("Flatten", ["a"], "f", axis=1),
            helper.make_node("Reshape", ["f", "shp"], ["b"], name="probe/back_Reshape"),
        ],
        [_c("shp", [1, C, H, W], np.int64)],
        C,
        "then a Reshape back to rank 4",
    ),
    "Unsqueeze": lambda: (
        [_node("Unsqueeze", ["a", "ax"], "u"), helper.make_node("Squeeze", ["u", "ax"], ["b"], name="probe/Squeeze")],
        [_c("ax", [4], np.int64)],
        C,
        "Unsqueeze then Squeeze on a new last axis",
    ),
    "Split": lambda: (
        [helper.make_node("Split", ["a", "sp"], ["b", "b2"], name="probe/Split", axis=1)],
        [_c("sp", [C // 2, C // 2], np.int64)],
        C // 2,
        "the second half is a graph output",
    ),
    "Slice": lambda: (
        [_node("Slice", ["a", "st", "en", "ax"])],
        [_c("st", [0], np.int64), _c("en", [C // 2], np.int64), _c("ax", [1], np.int64)],
        C // 2,
        "over channels",
    ),
    "Pad": lambda: (
        [_node("Pad", ["a", "pads"], mode="constant")],
        [_c("pads", [0, 0, 1, 1, 0, 0, 1, 1], np.int64)],
        C,
        "constant, 1 pixel",
    ),
    "Resize": lambda: (
        [_node("Resize", ["a", "", "scales"], mode="nearest")],
        [_c("scales", [1, 1, 2, 2])],
        C,
        "nearest, x2",
    ),
    "MatMul": lambda: ([_node("MatMul", ["a", "a"])], [], C, "two activation inputs"),
    "AveragePool": lambda: (
        [_node("AveragePool", ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
        [],
        C,
        "3x3, stride 1",
    ),
    "MaxPool": lambda: ([_node("MaxPool", ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])], [], C, "3x3, stride 1"),
    "Conv": lambda: (
        [_node("Conv", ["a", "w"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
        [_c("w", np.full((C, C, 3, 3), 0.01))],
        C,
        "3x3",
    ),
    "Constant": lambda: (
        [
            helper.make_node("Constant", [], ["k"], name="probe/Constant", value=_c("kv", np.ones((1, C, 1, 1)))),
            helper.make_node("Add", ["a", "k"], ["b"], name="probe/const_Add"),
        ],
        [],
        C,
        "feeding an Add",
    ),
    "Expand": lambda: (
        [
            helper.make_node("ReduceMean", ["a"], ["m"], name="probe/pre_ReduceMean", axes=[1], keepdims=1),
            _node("Expand", ["m", "shp"]),
        ],
        [_c("shp", [1, C, H, W], np.int64)],
        C,
        "[1,1,H,W] -> [1,C,H,W] (after a ReduceMean)",
    ),
    "InstanceNormalization": lambda: (
        [_node("InstanceNormalization", ["a", "s", "z"])],
        [_c("s", np.ones(C)), _c("z", np.zeros(C))],
        C,
        "per channel",
    ),
    "ConstantOfShape": lambda: (
        [
            helper.make_node("ConstantOfShape", ["shp"], ["z"], name="probe/ConstantOfShape", value=_c("zv", [1.0])),
            helper.make_node("Add", ["a", "z"], ["b"], name="probe/const_Add"),
        ],
        [_c("shp", [1, C, H, W], np.int64)],
        C,
        "added to the activation",
    ),
}


def op_probe(op: str) -> tuple[onnx.ModelProto, str]:
    """The probe for `op` (a KeyError when there is no builder): pre Conv -> op -> post Conv, all named."""
    nodes, inits, channels, note = OP_BUILDERS[op]()
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
    return onnx.shape_inference.infer_shapes(model, strict_mode=True), note


def rule_probe(rule: str, ops: DeviceOps) -> tuple[onnx.ModelProto, tuple[str, ...]]:
    """The rule's example graph and the nodes (or inputs) the rule covers in it; a ValueError when the
    example does not exhibit its own rule (a probe that asks nothing)."""
    model = R.RULES[rule].example()
    from .predict import predict

    matched = tuple(f.node for f in predict(index_model(model), ops).judgements if f.rule == rule)
    if not matched:
        raise ValueError(f"the example of rule {rule} does not match it")
    return model, matched


def _proven(model: onnx.ModelProto, path: Path) -> None:
    """Checker-clean and run once in onnxruntime, or an error: a broken probe would read as a refusal."""
    onnx.checker.check_model(model, full_check=True)
    if not all(np.isfinite(o).all() for o in run_once(model) if np.issubdtype(o.dtype, np.floating)):
        raise ValueError("non-finite output in onnxruntime")
    onnx.save(model, str(path))


def to_probe(ops: DeviceOps, extra: Iterable[str] = ()) -> dict[str, str]:
    """subject -> why: every op entry and rule the record leaves unjudged (or rests on an inference), and
    every op in `extra` (ops an export uses) that is unjudged. Op subjects read "op:<type>"."""
    why = unjudged(ops)
    for op in extra:
        entry = ops.entries.get(op)
        if entry is not None and entry.by_pattern:
            continue  # its nodes are judged by rules, and the unjudged rules are probed
        standing = op_standing(op, ops)
        if standing.prediction == UNJUDGED:
            why.setdefault(f"op:{op}", f"used by an export; {standing.prediction}: {standing.basis}")
    return dict(sorted(why.items()))


def write_probes(
    out: str | os.PathLike, ops: DeviceOps | None = None, *, extra: Iterable[str] = (), arch: str | None = None
) -> ProbePack:
    """Write one proven probe per unjudged op and rule, and the pack, into `out`.

    `out` must be absent, empty, or an earlier probe pack: an earlier pack is replaced whole (its stale
    results go with it), and anything else is refused. The pack is built beside `out` and moved in at the
    end, so a failure leaves `out` as it was."""
    ops = ops if ops is not None else load_device_ops()
    target = Path(out)
    _check_target(target)
    with building(target) as build:
        pack = _write_probes_into(build, ops, extra, arch)
    moved = DfcPack(
        folder=target, script=target / SCRIPT, manifest=target / MANIFEST, graphs=pack.pack.graphs, arch=pack.pack.arch
    )
    return ProbePack(pack=moved, probes=pack.probes, unbuilt=pack.unbuilt)


def _check_target(target: Path) -> None:
    if target.exists() and not target.is_dir():
        raise ValueError(f"--out: {target} is a file, not a folder")
    if target.is_dir() and any(target.iterdir()):
        try:
            manifest = read_pack(target)
        except ValueError as exc:
            raise ValueError(
                f"--out: {target} is not empty and not a probe pack of this suite; give an empty or new folder"
            ) from exc
        if "probes" not in manifest:
            raise ValueError(f"--out: {target} is a DFC pack of exported graphs, not of probes; give another folder")


@contextlib.contextmanager
def building(target: Path) -> Iterator[Path]:
    """A fresh folder beside `target` to build in; on success it replaces `target` (an earlier one is moved
    aside first, then deleted), on any failure it is removed and `target` is left as it was."""
    target.parent.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        yield build
        old = None
        if target.exists():
            old = target.with_name(f".{target.name}.old-{os.getpid()}")
            os.replace(target, old)
        os.replace(build, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        raise


def _write_probes_into(folder: Path, ops: DeviceOps, extra: Iterable[str], arch: str | None) -> ProbePack:
    probes, unbuilt = [], {}
    for subject, why in to_probe(ops, extra).items():
        kind, name = ("op", subject[3:]) if subject.startswith("op:") else ("rule", subject)
        file = f"probe_{name}.onnx" if kind == "op" else f"probe_rule_{name}.onnx"
        try:
            if kind == "op":
                if name not in OP_BUILDERS:
                    unbuilt[subject] = "no probe builder (named, not dropped): " + why
                    continue
                model, note = op_probe(name)
                nodes: tuple[str, ...] = tuple(n.name for n in model.graph.node if n.name.startswith(f"probe/{name}"))
            else:
                model, nodes = rule_probe(name, ops)
                note = R.RULES[name].what
            _proven(model, folder / file)
        except Exception as exc:  # a probe that does not prove itself is never handed to the DFC
            (folder / file).unlink(missing_ok=True)
            unbuilt[subject] = f"probe not proven: {type(exc).__name__}: {exc}"
            continue
        probes.append(Probe(subject=kind, name=name, file=file, why=why, nodes=nodes, note=note))
    pack = write_dfc_pack(
        [folder / p.file for p in probes],
        folder,
        arch,
        extra={"probes": [asdict(p) for p in probes], "unbuilt": unbuilt, "allowlist": ops.source},
    )
    return ProbePack(pack=pack, probes=tuple(probes), unbuilt=unbuilt)


# ---------------------------------------------------------------------------------- results -> yaml edit


def _probe_entry(entry: Any, where: Path) -> Probe:
    """A manifest's probe entry, checked: a malformed one is a ValueError naming the file, never a traceback."""
    try:
        probe = Probe(**{**entry, "nodes": tuple(entry.get("nodes", ()))})
    except (TypeError, AttributeError) as exc:
        raise ValueError(f"{where}: a probe entry is malformed ({exc}); write the pack again") from exc
    fields = (probe.subject, probe.name, probe.file, probe.why, *probe.nodes)
    if probe.subject not in ("op", "rule") or not all(isinstance(v, str) for v in fields):
        raise ValueError(f"{where}: a probe entry is malformed ({entry!r}); write the pack again")
    if Path(probe.file).name != probe.file or not probe.file.endswith(".onnx"):
        raise ValueError(f"{where}: probe file {probe.file!r} is not a graph of the pack folder")
    return probe


def probe_finding(  # noqa: PLR0911 - a decision ladder, read top to bottom; each rung returns its finding
    probe: Probe, result: DfcResult | None, folder: Path
) -> tuple[dict[str, Any] | None, str]:
    """(the evidence item a probe's DFC result adds, or None; what was found). Only an answer about the
    probe's own nodes becomes evidence: a failure on the wrapping layers, before any operator, or
    inconclusive, does not."""
    from .pairing import same_model

    if result is None:
        return None, "no DFC result yet"
    if result.model is not None and not same_model(result.model, probe.stem):
        return None, f"refused: the result is about model {result.model!r}, not {probe.stem!r}"
    base = {
        "dfc": result.dfc_version or "unknown",
        "arch": result.arch or "unknown",
        "source": f"weftlib.gate probes: {probe.file}, DFC result {probe.stem}.dfc.json",
    }
    if result.verdict == "parsed":
        return {"seen": "parsed", **base}, "parsed"
    if result.verdict != "rejected":
        return None, f"unjudged: {result.verdict} ({result.reason})"
    graph, _ = read_graph(folder / probe.file)
    node_ops = graph.node_ops() if graph is not None else {}
    cause = failure_cause(result, node_ops)
    if cause != "operator":
        return None, f"unjudged: {cause} ({result.exception or result.reason})"
    named = {e.node or "" for e in result.errors}
    if named & set(probe.nodes) or (probe.subject == "op" and any(node_ops.get(n) == probe.name for n in named)):
        note = "; ".join(f"{e.cls}: {e.message}" for e in result.errors)[:300]
        return {"seen": "rejected", **base, "note": note}, "rejected"
    return None, f"unjudged: the DFC rejected {sorted(n for n in named if n)}, not the nodes asked about"


def evidence_diff(folder: str | os.PathLike, ops_path: str | os.PathLike | None = None) -> tuple[str, list[dict]]:
    """The unified diff to `params/device_ops.yaml` that the probe results in `folder` imply, and one row per
    probe (subject, finding, the evidence item added)."""
    folder = Path(folder)
    manifest = read_pack(folder)
    probes = [_probe_entry(p, folder / MANIFEST) for p in manifest.get("probes", []) or []]
    if not probes:
        raise ValueError(f"{folder}: the manifest lists no probes")
    results = results_in(folder, [p.stem for p in probes])
    path = Path(ops_path) if ops_path else DEFAULT_PATH
    ops = load_device_ops(path)
    rows, additions = [], []
    for probe in probes:
        item, finding = probe_finding(probe, results.get(probe.stem), folder)
        section = (
            "graph_rules"
            if probe.subject == "rule"
            else ops.entries[probe.name].listed
            if probe.name in ops.entries
            else ""
        )
        if item is not None and not section:
            finding += " (the op is not listed: add it to device_ops or known_blockers with this evidence)"
        elif item is not None:
            additions.append((section, probe.name, item))
        rows.append({"subject": probe.label, "finding": finding, "evidence": json.dumps(item) if item else ""})
    text = path.read_text()
    new = with_evidence(text, additions) if additions else text
    diff = "".join(
        difflib.unified_diff(
            text.splitlines(True), new.splitlines(True), fromfile=str(path), tofile=f"{path} (with the probe results)"
        )
    )
    return diff, rows


def with_evidence(text: str, additions: Sequence[tuple[str, str, dict[str, Any]]]) -> str:
    """`text` (the YAML of params/device_ops.yaml) with each (section, entry, item) evidence item appended,
    edited round-trip by ruamel.yaml so every comment and every other line stays as it was."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString as Quoted

    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096  # the file keeps each evidence item on one line
    yaml.indent(mapping=2, sequence=4, offset=2)
    data = yaml.load(text)
    for section, name, item in additions:
        entry = data[section][name]
        if not isinstance(entry.get("evidence"), list):
            entry["evidence"] = CommentedSeq()
        flow = CommentedMap({k: Quoted(v) if isinstance(v, str) else v for k, v in item.items()})
        flow.fa.set_flow_style()
        entry["evidence"].append(flow)
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()
