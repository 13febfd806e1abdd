"""A fixed graph is offered only as a valid graph of the original's own IR version and opset: the ONNX checker
(full check, shapes included) must accept it there, as a user's tools would read it.

The rewrites keep the original's IR version and opset imports, but what they add follows today's IR: a new
constant is an initializer only, where IR 3 (before initializers could stand apart from the inputs) wants each
initializer listed as a graph input too. `at_ir` lists them so, which changes no value (an input fed nothing
reads its initializer); whatever the checker still refuses (an op the opset has not got) is named by
`refusal`, and that graph is never run nor offered.
"""

from __future__ import annotations

import os

import onnx
from onnx import helper

INITIALIZERS_APART = 4  # the first IR version whose initializers need not be graph inputs


def opsets(model: onnx.ModelProto) -> dict[str, int]:
    """Domain -> version of each opset the model imports ("" for the default domain)."""
    return {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import}


def at_ir(fixed: onnx.ModelProto, original: onnx.ModelProto) -> onnx.ModelProto:
    """`fixed` as its IR version has it: below IR 4, every initializer of the main graph also a graph input."""
    if original.ir_version >= INITIALIZERS_APART:
        return fixed
    out = onnx.ModelProto()
    out.CopyFrom(fixed)
    listed = {v.name for v in out.graph.input}
    for t in out.graph.initializer:
        if t.name not in listed:
            out.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    return out


def refusal(fixed: onnx.ModelProto, original: onnx.ModelProto, path: str | os.PathLike) -> str | None:
    """Why the fixed graph (`fixed`, saved at `path`) is not valid at the original's IR version and opset, in
    one line; None when the checker accepts it there."""
    where = f"IR {original.ir_version}, opset {opsets(original)}"
    if fixed.ir_version != original.ir_version or opsets(fixed) != opsets(original):
        return f"the fixed graph is IR {fixed.ir_version}, opset {opsets(fixed)}; the original is {where}"
    try:
        onnx.checker.check_model(os.fspath(path), full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        return f"the ONNX checker refuses the fixed graph at {where}: {first[:300]}"
    return None
