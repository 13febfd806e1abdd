"""The two torchvision operator schemas declared before torchvision is imported, so it imports beside CPU torch.

The PyPI torchvision 0.28.0 built for torch 2.13 is a CUDA build: its `_C.so` needs `libc10_cuda.so`, fails to
load beside the CPU torch, and `import torchvision` then stops at registering the Python fallback of
`torchvision::nms` ("operator torchvision::nms does not exist"). Declaring the schemas of `nms` and `qnms`
(without kernels) lets the import finish. No export calls them (detectors are cut before their NMS), and a
call would raise for want of a kernel, never compute something wrong.

Where torchvision's own library does load (the same wheel beside PyPI's CUDA torch, or a CPU build of
torchvision), it must define the namespace alone: a schema declared here first makes its load abort the process
(one namespace defined twice is a C++ error in the library's static initialiser: SIGABRT, no exception to
catch). So `declare()` loads torchvision's own library first, found without importing torchvision, and declares
only where that fails. It is idempotent.

In the project's venv `import torchvision` works as it is: the Makefile installs a `.pth` file (`write_pth`)
that puts `DeclareBeforeTorchvision` on the import path, so `declare()` runs when torchvision is first
imported (executed, not merely looked up), in a notebook, a test or a user's own export script.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # not at run time: the .pth imports this module at every start, and importlib.abc costs 13 ms
    from importlib.abc import Loader

SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)


@functools.cache
def declare() -> None:
    """Declare `torchvision::nms` and `torchvision::qnms` unless torchvision's own library defines them (loaded
    already, or loadable now)."""
    import torch

    if _defined("torchvision::nms") or load_own_library():
        return
    library = torch.library.Library("torchvision", "DEF")
    try:
        for schema in SCHEMAS:
            library.define(schema)
    except BaseException:
        library._destroy()  # the namespace given back: a later call may declare it whole
        raise
    _LIBRARIES.append(library)


_LIBRARIES: list[object] = []  # a Library unregisters its definitions when collected


def own_library() -> str | None:
    """The path of torchvision's compiled extension (`_C` with this interpreter's suffix), found without importing
    torchvision; None where torchvision or its extension is not installed."""
    spec = importlib.util.find_spec("torchvision")
    if spec is None:
        return None
    loaders = (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES)
    for folder in spec.submodule_search_locations or []:
        found = importlib.machinery.FileFinder(folder, loaders).find_spec("torchvision._C")
        if found is not None and found.origin:
            return found.origin
    return None


def load_own_library() -> bool:
    """Whether torchvision's own extension is loaded now and defines `torchvision::nms` (torchvision loading the
    same file later finds it loaded); False where it cannot load beside this torch."""
    import torch

    path = own_library()
    if path is None:
        return False
    try:
        torch.ops.load_library(path)
    except OSError:  # torch's answer when the file cannot be opened: a CUDA build beside CPU torch
        return False
    return _defined("torchvision::nms")


class DeclareBeforeTorchvision:
    """An import-path finder that hands out torchvision's own spec with its loader wrapped, so that `declare()`
    runs just before torchvision's `__init__` does. A finder cannot tell an import from a probe
    (`importlib.util.find_spec("torchvision")`, which torch itself makes while it is being imported): only the
    loader knows the module is executed."""

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name != "torchvision":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = cast("Loader", _DeclaringLoader(spec.loader))
        return spec


class _DeclaringLoader:
    """torchvision's own loader, with `declare()` run before it executes the module (a loader by its methods)."""

    def __init__(self, loader: Loader) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        declare()
        self.loader.exec_module(module)

    def __getattr__(self, name: str) -> Any:  # resource readers and the rest: the own loader's
        return getattr(self.loader, name)


def install_import_hook() -> None:
    """`DeclareBeforeTorchvision` first on `sys.meta_path`, unless torchvision is imported or the hook is there."""
    if "torchvision" not in sys.modules and not any(isinstance(f, DeclareBeforeTorchvision) for f in sys.meta_path):
        sys.meta_path.insert(0, DeclareBeforeTorchvision())


PTH_NAME = "weftlib-torchvision.pth"  # site reads .pth files in name order: after weftlib's editable install's
PTH_LINE = "import weftlib.rebuild.torchvision_schemas as schemas; schemas.install_import_hook()\n"


def write_pth() -> Path:
    """`PTH_NAME` written into this interpreter's site-packages: every start of it installs the hook."""
    import sysconfig

    path = Path(sysconfig.get_paths()["purelib"]) / PTH_NAME
    path.write_text(PTH_LINE)
    return path


def _defined(qualified: str) -> bool:
    import torch

    try:
        torch._C._dispatch_find_schema_or_throw(qualified, "")
    except RuntimeError:
        return False
    return True
