"""Export a torch module to one self-contained, constant-folded ONNX file the Hailo toolchain can read.

Why these choices:
- torch's dynamo exporter (`torch.export` based) is used, not the legacy TorchScript one: it is torch's
  supported path since 2.9, writes IR version 10 (the Dataflow Compiler's checker refuses newer IR),
  and keeps constants as initializers instead of scattering `Constant` nodes. Its own optimizer (pattern
  rewrites) is skipped, being much slower on the large shift graphs; only constant folding and clean-up
  passes run (`_fold`), which is what a fixed-shape graph needs.
  Its default of writing weights to an external `.data` file is switched off: the compiler and the gate of
  notebook 05 take one file, so the file must stay below protobuf's 2 GB limit or the export is refused.
- torch's exporter implements opset 18 and up; onnx's own 18 -> 17 converter fails on some ops (it left an
  opset-18 `Split` in our graphs), so `onnx_opset.to_opset17` rewrites the few ops that changed, explicitly.
- Shapes are fixed (the accelerator compiles one geometry), so every `Shape`/`Range`/`ConstantOfShape`
  computation is folded away; what cannot be folded is reported in `ExportReport.plumbing`.
- Nothing half-written: the file is built and checked under a temporary name and moved into place only
  after `onnx.checker` accepted it and onnxruntime ran it.
- What the written graph holds (op counts, Gathers, largest tensors) is read by `inventory`, which also
  summarises files already on disk without importing torch.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from ..workers import map_forked
from . import exporter_registry, inventory, parity
from . import opset as onnx_opset
from .compare import max_abs_diff
from .runtime import session
from .walk import STANDARD_DOMAINS, WRITTEN_IR_VERSION, WRITTEN_OPSET

MIN_OPSET = WRITTEN_OPSET
EXPORTER_OPSET = 18  # the lowest opset torch's dynamo exporter implements; 17 is reached by onnx_opset
FOLD_INPUT_LIMIT = 1 << 20  # elements; onnxscript's default (8192) leaves large constant index math unfolded
FOLD_OUTPUT_LIMIT = 1 << 22  # elements (16 MiB of fp32) a folded constant may reach
FILL_LIMIT_BYTES = 64 << 20  # largest ConstantOfShape turned into an initializer
KEPT_RUN_AS_WRITTEN = True  # a check whose run is kept (`keep_run`) runs the file with onnxruntime's optimisations
# off: the arithmetic a cut's chain of segments repeats, so the kept run is 06's reference for that cut
T = TypeVar("T")
R = TypeVar("R")


class ExportError(RuntimeError):
    """The module could not be turned into a valid, runnable ONNX file; the message says which step failed."""


@dataclass
class ExportReport:
    """What the exported file is and whether onnxruntime reproduces torch on the export's own inputs."""

    path: Path
    file_bytes: int
    ir_version: int
    opset: int
    ops: dict[str, int]
    nodes: dict[str, list[str]]
    domains: list[str]
    largest_initializer: tuple[str, int]
    largest_intermediate: tuple[str, int]
    max_abs_diff: float
    parity_ok: bool
    atol: float
    initializer_bytes: int = 0
    plumbing: dict[str, int] = field(default_factory=dict)
    dynamic_gathers: list[str] = field(default_factory=list)
    input_shapes: dict[str, list[int]] = field(default_factory=dict)
    output_shapes: dict[str, list[int]] = field(default_factory=dict)
    export_seconds: float = 0.0
    identity: dict[str, str] | None = None  # what the graph is (`gate.run_graphs.GraphIdentity`); None: unknown

    @property
    def node_count(self) -> int:
        return sum(self.ops.values())

    @property
    def standard_only(self) -> bool:
        """True when every node is in the default ai.onnx domain (no custom or Microsoft-only ops)."""
        return all(d in STANDARD_DOMAINS for d in self.domains)


# ---------------------------------------------------------------------------------------------- checks


def _check_names(names: Any, what: str, expected: int | None) -> list[str]:
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) and n for n in names):
        raise TypeError(f"{what} must be a list of non-empty strings, got {names!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"{what} must be unique, got {list(names)}")
    if expected is not None and len(names) != expected:
        raise ValueError(f"{what} has {len(names)} names but there are {expected} tensors to name")
    return list(names)


def _check_export_args(
    module: Any, args: Any, path: Any, input_names: Any, output_names: Any, opset: Any, atol: Any
) -> tuple[Path, list[str], list[str]]:
    """Validate everything before any tracing starts, so a bad call fails fast and names its argument."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    if not isinstance(args, tuple) or not args:
        raise TypeError(f"args must be a non-empty tuple of tensors, got {type(args).__name__}")
    for i, a in enumerate(args):
        if not isinstance(a, torch.Tensor):
            raise TypeError(f"args[{i}] must be a torch.Tensor (shapes are fixed from it), got {type(a).__name__}")
    target = Path(path)
    if target.suffix != ".onnx":
        raise ValueError(f"path must end in .onnx, got {str(target)!r}")
    if not target.parent.is_dir():
        raise FileNotFoundError(f"path's folder {str(target.parent)!r} does not exist")
    ins = _check_names(input_names, "input_names", len(args))
    outs = _check_names(output_names, "output_names", None)
    if isinstance(opset, bool) or not isinstance(opset, int):
        raise TypeError(f"opset must be an int, got {opset!r}")
    newest = onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= opset <= newest:
        raise ValueError(f"opset must be in [{MIN_OPSET}, {newest}] (installed onnx), got {opset}")
    if isinstance(atol, bool) or not isinstance(atol, (int, float)) or not atol >= 0:
        raise ValueError(f"atol must be a non-negative number, got {atol!r}")
    return target, ins, outs


# -------------------------------------------------------------------------------------------- runtime


def run_onnx(path: Any, inputs: dict[str, np.ndarray] | tuple | list) -> list[np.ndarray]:
    """Run an ONNX file (or an existing session) on named inputs, or positional ones in graph order; a file
    is run once (`runtime.session`, no arena)."""
    sess = path if hasattr(path, "get_inputs") else session(path, once=True)
    names = [i.name for i in sess.get_inputs()]
    if isinstance(inputs, dict):
        missing = sorted(set(names) - set(inputs))
        if missing:
            raise ValueError(f"inputs is missing {missing}; the graph takes {names}")
        feed = {n: np.asarray(inputs[n]) for n in names}
    elif isinstance(inputs, (tuple, list)):
        if len(inputs) != len(names):
            raise ValueError(f"inputs has {len(inputs)} arrays but the graph takes {len(names)}: {names}")
        feed = dict(zip(names, (np.asarray(a) for a in inputs)))
    else:
        raise TypeError(f"inputs must be a dict or a tuple of arrays, got {type(inputs).__name__}")
    return list(sess.run(None, feed))


def _flatten_outputs(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flatten_outputs(o)]
    raise TypeError(f"module must return tensors (or tuples of them), got {type(out).__name__}")


# ------------------------------------------------------------------------------------------- building


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence the exporter's progress prints, warnings and log lines (restored afterwards)."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with (
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(io.StringIO()),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _dynamo_export(module: torch.nn.Module, args: tuple[torch.Tensor, ...], opset: int, **names: Any) -> Any:
    """torch's dynamo exporter as the suite calls it everywhere: at the lowest opset it implements (18) or
    higher, weights inside the file, no optimizer pass (the suite folds constants itself), torch's op table
    built once per process (`exporter_registry`)."""
    with exporter_registry.reused():
        return torch.onnx.export(
            module,
            args,
            dynamo=True,
            opset_version=max(opset, EXPORTER_OPSET),
            external_data=False,
            optimize=False,
            verbose=False,
            **names,
        )


def in_forks(
    fn: Callable[[T], R], items: Iterable[T], workers: int | None = None, progress: Callable[[T], Any] | None = None
) -> list[R]:
    """`workers.map_forked` for jobs that export: torch's op table is built here first (`exporter_registry.warm`),
    so every forked job inherits it instead of building its own (half a second a job; 02's sweep forks dozens)."""
    exporter_registry.warm(EXPORTER_OPSET)
    return map_forked(fn, items, workers, progress)


def _trace(
    module: torch.nn.Module, args: tuple[torch.Tensor, ...], input_names: list[str], output_names: list[str], opset: int
) -> Any:
    """torch.export -> ONNX (an onnx_ir model); the exporter's chatter is kept out of the notebook."""
    try:
        with quiet():
            program = _dynamo_export(module, args, opset, input_names=input_names, output_names=output_names)
    except Exception as exc:
        raise ExportError(
            f"torch.onnx.export (dynamo) failed for {type(module).__name__}: {type(exc).__name__}: {str(exc)[:2000]}"
        ) from exc
    return program.model


def _fold(model: Any) -> Any:
    """Constant folding only (onnxscript's full optimizer also runs pattern rewrites, which a fixed-shape graph does not need):
    fixed shapes make all index and shape math constant; limits are raised so large index tables fold."""
    import onnxscript.optimizer
    from onnx_ir.passes import common

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            result = onnxscript.optimizer.fold_constants(
                model, input_size_limit=FOLD_INPUT_LIMIT, output_size_limit=FOLD_OUTPUT_LIMIT
            )
            onnxscript.optimizer.remove_unused_nodes(model)
            if not result.modified:
                break
        for cleanup in (
            common.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0),
            common.IdentityEliminationPass(),
            common.CommonSubexpressionEliminationPass(),
            common.DeduplicateInitializersPass(),
            common.RemoveUnusedNodesPass(),
        ):
            cleanup(model)
    return model


def _check_size(model: Any) -> None:
    """Refuse before serialising: protobuf cannot hold a file above 2 GB, and we keep one file."""
    total = sum(int(v.const_value.nbytes) for v in model.graph.initializers.values() if v.const_value is not None)
    if total >= onnx.checker.MAXIMUM_PROTOBUF:
        raise ExportError(
            f"initializers take {total / 2**30:.2f} GiB; one self-contained ONNX file must stay below "
            f"protobuf's 2 GiB limit, and the external-data form is not accepted by this suite's gate"
        )


def _materialise_fills(model: onnx.ModelProto) -> onnx.ModelProto:
    """ConstantOfShape with a constant shape is a literal fill: store it as an initializer (onnxscript
    never folds this op, to avoid bloat) unless it exceeds FILL_LIMIT_BYTES."""
    inits = {i.name: i for i in model.graph.initializer}
    keep = []
    for node in model.graph.node:
        shape_init = inits.get(node.input[0]) if node.op_type == "ConstantOfShape" and node.input else None
        if shape_init is None:
            keep.append(node)
            continue
        value = next(
            (numpy_helper.to_array(a.t) for a in node.attribute if a.name == "value"), np.zeros(1, dtype=np.float32)
        )
        shape = [int(d) for d in numpy_helper.to_array(shape_init)]
        if int(np.prod(shape, dtype=np.int64)) * value.dtype.itemsize > FILL_LIMIT_BYTES:
            keep.append(node)
            continue
        filled = np.full(shape, value.reshape(-1)[0], dtype=value.dtype)
        model.graph.initializer.append(numpy_helper.from_array(filled, name=node.output[0]))
    del model.graph.node[:]
    model.graph.node.extend(keep)
    return model


def _to_proto(model: Any, opset: int) -> onnx.ModelProto:
    import onnx_ir as ir

    # shapes inferred once, kept in the file: every later reader (the report below, the gate, the cut)
    # finds each tensor's shape there instead of inferring again, which copies the whole model each time
    proto = onnx.shape_inference.infer_shapes(ir.serde.serialize_model(model), data_prop=True)
    if opset < EXPORTER_OPSET:
        try:
            proto = onnx_opset.to_opset17(proto)
        except onnx_opset.OpsetError as exc:
            raise ExportError(f"opset {opset}: {exc}") from exc
    if inventory.opset_of(proto) != opset:
        raise ExportError(
            f"the exporter could not convert the graph to opset {opset} "
            f"(it kept opset {inventory.opset_of(proto)}); an op has no opset-{opset} form"
        )
    proto = _materialise_fills(proto)
    stored = {i.name for i in proto.graph.initializer}
    kept = [v for v in proto.graph.value_info if v.name not in stored]  # a fill now stored is no value
    del proto.graph.value_info[:]
    proto.graph.value_info.extend(kept)
    proto.ir_version = min(proto.ir_version, WRITTEN_IR_VERSION)
    return proto


def _write_checked(proto: onnx.ModelProto, folder: Path) -> Path:
    """Serialise to a temporary file next to the target and run the full checker on it."""
    data = proto.SerializeToString()
    fd, tmp_name = tempfile.mkstemp(suffix=".onnx.tmp", dir=folder)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o666 & ~umask)  # mkstemp makes it private; the artefact is published like any file
        onnx.checker.check_model(str(tmp), full_check=True)
    except Exception as exc:
        tmp.unlink(missing_ok=True)
        raise ExportError(f"onnx.checker rejected the exported graph: {type(exc).__name__}: {exc}") from exc
    return tmp


def _describe(proto: onnx.ModelProto, path: Path, atol: float, diff: float, seconds: float) -> ExportReport:
    ops = inventory.inventory(proto)
    return ExportReport(
        path=path,
        file_bytes=path.stat().st_size,
        ir_version=int(proto.ir_version),
        opset=inventory.opset_of(proto),
        ops=ops,
        nodes=inventory.node_names(proto),
        domains=inventory.domains(proto),
        largest_initializer=inventory.largest_initializer(proto),
        largest_intermediate=inventory.largest_intermediate(proto),
        max_abs_diff=diff,
        parity_ok=bool(diff <= atol),
        atol=float(atol),
        initializer_bytes=inventory.initializer_bytes(proto),
        plumbing=inventory.plumbing(ops),
        dynamic_gathers=inventory.dynamic_gathers(proto),
        input_shapes=inventory.shapes(proto.graph.input),
        output_shapes=inventory.shapes(proto.graph.output),
        export_seconds=seconds,
    )


def export(
    module: torch.nn.Module,
    args: tuple[torch.Tensor, ...],
    path: str | os.PathLike,
    *,
    input_names: list[str],
    output_names: list[str],
    opset: int = 17,
    atol: float = 1e-4,
    outputs: Any = None,
    identity: Mapping[str, str] | None = None,
    keep_run: Callable[[dict[str, np.ndarray], dict[str, np.ndarray]], None] | None = None,
) -> ExportReport:
    """Export `module` at the fixed shapes of `args` to one ONNX file at `path` and check it.

    The file is written only if the exporter, the optimizer, `onnx.checker` and onnxruntime all succeed;
    `parity_ok` says whether onnxruntime matched torch within `atol` (a measurement, not an error).
    `outputs`: what `module(*args)` already returned in eval mode without gradients (at NAF's geometry a
    forward is seconds; the caller that compared it with a reference need not pay for it twice).
    `identity`: what the graph is (`gate.run_graphs.GraphIdentity.as_json`), kept in its parity file for the gate;
    None leaves it of unknown identity, as a user's ONNX is.
    `keep_run`: given the inputs and onnxruntime's outputs of the written file, by name, once it is written (the
    run a fix of the graph is proven on, where running it again would be minutes: `gate.fix.recorded`); that
    check runs the file as written (`KEPT_RUN_AS_WRITTEN`), any other with onnxruntime's optimisations.
    """
    target, ins, outs = _check_export_args(module, args, path, input_names, output_names, opset, atol)
    if outputs is not None and module.training:
        raise ValueError("outputs: given for a module in training mode; put it in eval mode before running it")
    module = module.eval()
    if outputs is None:
        with torch.no_grad():
            outputs = module(*args)
    expected = [t.detach().cpu().numpy() for t in _flatten_outputs(outputs)]
    _check_names(outs, "output_names", len(expected))
    start = time.perf_counter()
    model = _fold(_trace(module, args, ins, outs, opset))
    _check_size(model)
    proto = _to_proto(model, opset)
    seconds = time.perf_counter() - start
    tmp = _write_checked(proto, target.parent)
    try:
        feeds = {n: a.detach().cpu().numpy() for n, a in zip(ins, args)}
        as_written = keep_run is not None and KEPT_RUN_AS_WRITTEN
        actual = run_onnx(session(tmp, once=True, optimize=not as_written), feeds)
    except Exception as exc:
        tmp.unlink(missing_ok=True)
        raise ExportError(f"onnxruntime could not run the exported graph: {type(exc).__name__}: {exc}") from exc
    os.replace(tmp, target)
    report = _describe(proto, target, atol, max_abs_diff(expected, actual), seconds)
    report.identity = dict(identity) if identity is not None else None
    write_parity(report)
    if keep_run is not None:
        keep_run(feeds, dict(zip(outs, actual, strict=True)))
    return report


def parity_path(onnx_path: str | os.PathLike) -> Path:
    """Where the numeric check of an exported file is kept: `<stem>.parity.json` beside it (`parity.path`)."""
    return parity.path(onnx_path)


def write_parity(report: ExportReport) -> Path:
    """Keep the torch-versus-onnxruntime check and the graph's identity next to the file, so the device gate
    (which reads ONNX files and never the torch model) can include the one and read the other."""
    check = {"max_abs_diff": float(report.max_abs_diff), "atol": report.atol, "parity_ok": report.parity_ok}
    return parity.write(report.path, check, report.identity)


# ----------------------------------------------------------------------------------- as-written attempt


def first_error_line(exc: BaseException) -> str:
    """'Type: first line' of the innermost cause: exporters wrap the real refusal (e.g. a DispatchError on
    one aten op) in a generic 'failed to convert' error whose first line names nothing."""
    root = exc
    seen = {id(root)}
    while (nxt := root.__cause__ or root.__context__) is not None and id(nxt) not in seen:
        seen.add(id(nxt))
        root = nxt
    line = next((s.strip() for s in str(root).splitlines() if s.strip()), "")
    return f"{type(root).__name__}: {line}"


@contextlib.contextmanager
def quiet_fd(fd: int) -> Iterator[None]:
    """Send a file descriptor to /dev/null for the block: C++ prints below Python's sys.stdout (the TorchScript
    exporter its whole IR graph on failure, onnxsim a line per node it could not fold), and a kernel forwards fds
    1 and 2 into the notebook."""
    import sys

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    saved = os.dup(fd)
    try:
        with open(os.devnull, "wb") as sink:
            os.dup2(sink.fileno(), fd)
        yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


def attempt(
    module: torch.nn.Module, args: tuple[torch.Tensor, ...], *, dynamo: bool, opset: int = 17
) -> tuple[bool, str, float]:
    """Run one of torch's exporters on the module as written and keep only whether it went through.

    Returns (ok, error, seconds), `error` being `first_error_line` of the failure ("" when ok). Nothing is
    written and nothing is raised for an exporter failure: that the exporter refuses is the measurement.
    The TorchScript exporter runs at `opset`; the dynamo one at max(opset, 18), the lowest it implements.
    """
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    if not isinstance(args, tuple) or not all(isinstance(a, torch.Tensor) for a in args):
        raise TypeError("args must be a tuple of tensors")
    start = time.perf_counter()
    try:
        with quiet(), quiet_fd(1), quiet_fd(2), torch.no_grad():
            if dynamo:
                _dynamo_export(module.eval(), args, opset)
            else:
                torch.onnx.export(module.eval(), args, io.BytesIO(), dynamo=False, opset_version=opset)  # type: ignore[arg-type]  # the stub omits the file objects torch documents
    except Exception as exc:  # the exporter's refusal is the result
        return False, first_error_line(exc), time.perf_counter() - start
    return True, "", time.perf_counter() - start
