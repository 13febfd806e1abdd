"""Where a dependency comes from: what the source says (static) and what actually runs (dynamic).

A dependency can arrive without any `import` in the code that needs it: a `torch.hub.load` executes another
repository's code, which imports and calls the dependency. Reading the host's source then finds only install
lines. The suite puts three views side by side (`scan`, here, `dependencies`):

- `static_scan(root, name)`: what a reader of the source finds (mentions, imports, hub loads, requirements);
- `trace_calls(fn, *args, target=..., **kwargs)`: every distinct call chain from the code under study into the
  target package, plus the import statements executed during the call and who executed them;
- `audit(host_root, traces)`: declared vs. found vs. imported, flagging what arrives undeclared.

The tracer uses the profile hook (`sys.setprofile`, 3.11 has no `sys.monitoring`): the hook sees every Python
call, so it does one string-prefix test per call and only walks the stack when the target is entered.
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import importlib.metadata
import importlib.util
import os
import re
import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType, TracebackType
from typing import Any, Literal

ProfileEvent = Literal["call", "return", "c_call", "c_return", "c_exception"]  # what sys.setprofile reports

MAX_ENTRIES = 64


def _library_prefixes() -> tuple[str, ...]:
    """Installed-library locations: frames there are plumbing (torch, importlib), hidden when rendering."""
    paths = sysconfig.get_paths()
    roots = {os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    return tuple(sorted(r.rstrip(os.sep) + os.sep for r in roots))


LIBRARY_PREFIXES = _library_prefixes()
COMPREHENSIONS = {"<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>"}


@functools.lru_cache(maxsize=4096)
def _is_plumbing(filename: str) -> bool:
    """Frozen importlib, installed libraries, and this module's own hooks: not the code under study."""
    if filename.startswith("<") or filename == __file__:
        return True
    return os.path.realpath(filename).startswith(LIBRARY_PREFIXES)


@dataclass(frozen=True)
class Frame:
    """One stack frame: the line it was executing (the call site) and which function it is."""

    file: str
    line: int
    function: str
    module: str
    in_target: bool
    library: bool

    def label(self, qualified: bool) -> str:
        """`file.py:LINE` outside the target; `module.qualname` or `qualname` inside it."""
        if not self.in_target:
            return f"{os.path.basename(self.file)}:{self.line}"
        if self.function == "<module>":  # import-time execution: the module is the name
            return self.module
        return f"{self.module}.{self.function}" if qualified else self.function


@dataclass(frozen=True)
class CallChain:
    """A path through the stack, outermost first. Library frames are kept but not rendered."""

    frames: tuple[Frame, ...]

    def shown(self) -> tuple[Frame, ...]:
        """Frames of the code under study and of the target (library plumbing left out)."""
        return tuple(f for f in self.frames if f.in_target or not f.library)

    def labels(self) -> list[str]:
        """Rendered frames; a target frame is fully qualified where the chain enters the target."""
        shown = self.shown()
        return [f.label(qualified=not (i and shown[i - 1].in_target)) for i, f in enumerate(shown)]

    def __str__(self) -> str:
        return " -> ".join(self.labels())

    def key(self) -> tuple[str, ...]:
        return tuple(self.labels())


@dataclass(frozen=True)
class TensorSpec:
    """Shape, dtype and device of a tensor argument: enough to rebuild an equivalent input later."""

    shape: tuple[int, ...]
    dtype: str
    device: str

    def empty(self) -> Any:
        """An uninitialised tensor with this spec (for probing code that only looks at metadata)."""
        import torch

        return torch.empty(self.shape, dtype=getattr(torch, self.dtype.removeprefix("torch.")), device=self.device)


@dataclass(frozen=True)
class TargetEntry:
    """A call that crossed into the target from outside it, with its arguments summarised."""

    chain: CallChain
    function: str
    args: dict[str, Any]


@dataclass(frozen=True)
class ImportEvent:
    """An import statement executed during the traced call, where it was executed, and the stack above it."""

    name: str
    importer: str
    new: bool
    chain: CallChain

    @property
    def top_level(self) -> str:
        return self.name.split(".")[0]

    @property
    def direct(self) -> bool:
        """Executed by the code under study, not inside another library (transitive imports are not)."""
        return bool(self.chain.frames) and not self.chain.frames[-1].library


@dataclass
class CallTrace:
    """What `trace_calls` saw. `error` holds the exception `fn` raised (not re-raised)."""

    target: str
    chains: list[CallChain] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    entries: list[TargetEntry] = field(default_factory=list)
    imports: list[ImportEvent] = field(default_factory=list)
    new_modules: list[str] = field(default_factory=list)
    result: Any = None
    error: BaseException | None = None
    error_chain: CallChain | None = None
    seconds: float = 0.0

    @property
    def entered(self) -> bool:
        return bool(self.chains)

    @property
    def raised(self) -> str:
        """'Type: message' of the exception fn raised, '' when it returned."""
        return "" if self.error is None else f"{type(self.error).__name__}: {self.error}"

    def ending(self, suffix: str) -> list[CallChain]:
        """Chains whose rendering ends with `suffix` (e.g. 'neighborhood_attention_generic -> cutlass_fna_generic')."""
        return [c for c in self.chains if str(c).endswith(suffix)]

    def leaves(self) -> list[CallChain]:
        """The deepest chains: those that are not the beginning of another recorded chain."""
        keys = [c.key() for c in self.chains]
        return [c for c, k in zip(self.chains, keys) if not any(len(o) > len(k) and o[: len(k)] == k for o in keys)]

    def records(self) -> list[dict[str, Any]]:
        """One row per distinct chain, for a table or metrics.json."""
        return [{"chain": str(c), "depth": len(c.shown()), "calls": n} for c, n in zip(self.chains, self.counts)]


def _summarise(value: Any) -> Any:
    """Tensors by spec, small literals as they are, anything else by type name."""
    if all(hasattr(value, a) for a in ("shape", "dtype", "device")):
        return TensorSpec(tuple(int(s) for s in value.shape), str(value.dtype), str(value.device))
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)) and len(value) <= 8:
        return tuple(_summarise(v) for v in value)
    return type(value).__name__


class _Tracer:
    """One traced call: the profile hook, the import wrapper, and what they collected."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.prefix = target_prefix(target)
        self.trace = CallTrace(target=target)
        self.index: dict[tuple[str, ...], int] = {}
        self.boundary: FrameType | None = None
        self.thread = threading.get_ident()
        self.active = False

    def frame(self, frame: FrameType) -> Frame:
        code = frame.f_code
        filename = code.co_filename
        in_target = filename.startswith(self.prefix)
        library = in_target or _is_plumbing(filename)
        return Frame(
            filename, frame.f_lineno, code.co_qualname, frame.f_globals.get("__name__", "?"), in_target, library
        )

    def chain(self, frame: FrameType | None) -> CallChain:
        """The stack from `frame` up to (not including) the frame that called `trace_calls`."""
        frames = []
        while frame is not None and frame is not self.boundary:
            frames.append(self.frame(frame))
            frame = frame.f_back
        return CallChain(tuple(reversed(frames)))

    def on_target_call(self, frame: FrameType) -> None:
        if not self.active or frame.f_code.co_name in COMPREHENSIONS:  # generators resuming: not calls to follow
            return
        chain = self.chain(frame)
        key = chain.key()
        if key in self.index:
            self.trace.counts[self.index[key]] += 1
            return
        self.index[key] = len(self.trace.chains)
        self.trace.chains.append(chain)
        self.trace.counts.append(1)
        caller = frame.f_back
        outside = caller is None or not caller.f_code.co_filename.startswith(self.prefix)
        if outside and len(self.trace.entries) < MAX_ENTRIES:
            code = frame.f_code
            names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
            args = {n: _summarise(frame.f_locals[n]) for n in names if n in frame.f_locals}
            function = f"{frame.f_globals.get('__name__', '?')}.{code.co_qualname}"
            self.trace.entries.append(TargetEntry(chain, function, args))

    def make_hook(self) -> Callable[[FrameType, ProfileEvent, Any], None]:
        """The profile function: one comparison per event, one prefix test per Python call."""
        prefix, on_call = self.prefix, self.on_target_call

        def hook(frame: FrameType, event: ProfileEvent, arg: Any) -> None:
            if event == "call" and frame.f_code.co_filename.startswith(prefix):
                on_call(frame)

        return hook

    def importer(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """A `builtins.__import__` that notes each import statement of this thread, then imports."""

        def traced_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0):
            caller = sys._getframe(1)
            if self.active and threading.get_ident() == self.thread and not caller.f_code.co_filename.startswith("<"):
                self.on_import(caller, name, globals, level)
            return original(name, globals, locals, fromlist, level)

        return traced_import

    def on_import(self, caller: FrameType, name: str, globals: Any, level: int) -> None:
        if level:
            package = (globals or {}).get("__package__") or ""
            try:
                name = importlib.util.resolve_name("." * level + name, package)
            except ImportError:
                name = "." * level + name
        where = f"{os.path.basename(caller.f_code.co_filename)}:{caller.f_lineno}"
        self.trace.imports.append(ImportEvent(name, where, name not in sys.modules, self.chain(caller)))


def target_prefix(target: str) -> str:
    """The directory of the target package (found without importing it), with a trailing separator."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", target or ""):
        raise ValueError(f"target: {target!r} is not a top-level package name")
    spec = importlib.util.find_spec(target)
    if spec is None:
        raise ModuleNotFoundError(f"target: no package {target!r} is installed, so nothing could enter it")
    if spec.submodule_search_locations:
        return os.path.join(next(iter(spec.submodule_search_locations)), "")
    if spec.origin:
        return spec.origin
    raise ValueError(f"target: {target!r} has no source location to recognise its frames by")


def _traceback_chain(tracer: _Tracer, tb: TracebackType | None) -> CallChain:
    """Frames of a traceback below `trace_calls`, each at the line that was executing."""
    frames = []
    while tb is not None:
        frames.append(dataclasses.replace(tracer.frame(tb.tb_frame), line=tb.tb_lineno))
        tb = tb.tb_next
    return CallChain(tuple(frames[1:]))  # the first frame is trace_calls' own


def trace_calls(fn: Callable[..., Any], *args: Any, target: str = "natten", **kwargs: Any) -> CallTrace:
    """Run `fn(*args, **kwargs)` and record every distinct call chain that enters the package `target`.

    Also records the import statements executed during the call (with the importer's file:line) and the
    modules that were loaded. If `fn` raises, the exception is kept on the result with the chains seen so far:
    the path into a failing backend is evidence too. Any profile hook already installed is called through
    and put back afterwards. Imports are recorded for the calling thread only.
    """
    if not callable(fn):
        raise TypeError(f"fn: expected a callable, got {type(fn).__name__}")
    previous, previous_threads = sys.getprofile(), threading.getprofile()
    if previous is not None and not callable(previous):
        raise RuntimeError(
            f"a C-level profiler ({type(previous).__name__}, e.g. cProfile) is active: sys.setprofile "
            "could not put it back after tracing, so stop it first"
        )
    tracer = _Tracer(target)
    hook = own = tracer.make_hook()
    if callable(previous):

        def hook(frame: FrameType, event: ProfileEvent, arg: Any) -> None:  # keep the previous profiler fed
            own(frame, event, arg)
            previous(frame, event, arg)

    original_import = builtins.__import__
    modules_before = set(sys.modules)
    tracer.boundary = sys._getframe()
    started = time.perf_counter()
    tracer.active = True
    builtins.__import__ = tracer.importer(original_import)
    threading.setprofile(hook)
    sys.setprofile(hook)
    try:
        tracer.trace.result = fn(*args, **kwargs)
    except Exception as exc:  # kept as evidence, not re-raised
        tracer.trace.error = exc
        tracer.trace.error_chain = _traceback_chain(tracer, exc.__traceback__)
    finally:
        sys.setprofile(previous)
        threading.setprofile(previous_threads)
        builtins.__import__ = original_import
        tracer.active = False
    tracer.trace.seconds = time.perf_counter() - started
    tracer.trace.new_modules = sorted(set(sys.modules) - modules_before)
    return tracer.trace
