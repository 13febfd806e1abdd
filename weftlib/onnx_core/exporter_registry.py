"""torch's table of ATen -> ONNX functions, built once per process and opset instead of once per export.

Why: torch 2.13's dynamo exporter rebuilds that table (`ONNXRegistry.from_torchlib`) on every
`torch.onnx.export` call, re-reading the source of about 500 onnxscript functions only to learn their
domain. That is about half a second a call, more than a small graph's whole export once it is gone, and the
suite exports dozens of graphs in one process (the attention variants, the rewrites, the tests).

The table is a function of the installed torch and onnxscript, the opset and what onnxscript has registered,
so `reused()` keeps one per (opset, count of onnxscript's registered functions) and hands every export its own
shallow copy: an export may register custom functions into the table it is given, and those stay in that copy.
Outside `reused()` torch builds its table as before. tests/test_exporter_registry.py holds a graph exported
through a kept table byte-equal to the same graph exported by torch alone.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections.abc import Iterator
from typing import Any

from torch.onnx._internal.exporter import _registration

_Registry = _registration.ONNXRegistry
_build: Any = vars(_Registry)["from_torchlib"].__func__  # torch's own builder, which the kept tables come from
_kept: dict[tuple[int, int], Any] = {}
_state = threading.local()  # inside `reused()` on this thread


def _onnxscript_functions() -> int:
    """How many functions onnxscript's torchlib has registered: a new registration means a new table."""
    from onnxscript.function_libs.torch_lib import ops  # noqa: F401  # registers torchlib's functions, as torch does
    from onnxscript.function_libs.torch_lib.registration import default_registry

    return sum(len(f.overloads) + len(f.complex) for f in default_registry.values())


def _copy(table: Any) -> Any:
    """A table of its own: the dict and each list of candidates copied, the functions themselves shared."""
    mine = copy.copy(table)
    mine.functions = {target: list(candidates) for target, candidates in table.functions.items()}
    return mine


def _kept_table(opset_version: int) -> Any:
    key = (int(opset_version), _onnxscript_functions())
    if key not in _kept:
        _kept[key] = _build(_Registry, opset_version)
    return _kept[key]


def _from_torchlib(cls: type, opset_version: int = _registration._constants.TORCHLIB_OPSET) -> Any:
    if not getattr(_state, "on", False) or cls is not _Registry:
        return _build(cls, opset_version)
    return _copy(_kept_table(opset_version))


def warm(opset_version: int) -> None:
    """Build the table for `opset_version` now if it is not kept: processes forked from here inherit it."""
    _kept_table(opset_version)


# In torch's place from this module's import on; outside `reused()` it is torch's builder, called as before.
_Registry.from_torchlib = classmethod(_from_torchlib)  # type: ignore[method-assign, assignment]


@contextlib.contextmanager
def reused() -> Iterator[None]:
    """Exports on this thread inside the block take their table from the kept one."""
    before = getattr(_state, "on", False)
    _state.on = True
    try:
        yield
    finally:
        _state.on = before


def kept_tables() -> int:
    """How many tables this process keeps (one per opset and onnxscript registration count seen)."""
    return len(_kept)
