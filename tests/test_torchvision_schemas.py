"""`weftlib.rebuild.torchvision_schemas` where torchvision's own library loads (a torchvision built for this
torch: the pinned wheel beside PyPI's CUDA torch). A stand-in `torchvision` package holds a real compiled
library that defines the `torchvision` namespace in C++, as torchvision's `_C.so` does, and loads it on import as
torchvision's `extension.py` does. Declaring the schemas before that load aborts the process (SIGABRT from the
library's static initialiser), so each case runs in a child. Where the library does not load (this machine's
CUDA wheel beside CPU torch) `tests/test_rebuilt_exports.py` checks the declared schemas; here, that the venv's
`.pth` hook is what lets a plain `import torchvision` through."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch.utils import cpp_extension

from weftlib.rebuild import torchvision_schemas

pytestmark = pytest.mark.exports  # the exporters' environment: children that import torch and torchvision

LIBRARY = """
#include <torch/library.h>
TORCH_LIBRARY(torchvision, m) {
  m.def("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor");
  m.def("roi_align_probe(Tensor x) -> Tensor");  // defined by no declaration of weftlib's: this library loaded
}
"""
PACKAGE = """
import os, torch
torch.ops.load_library(os.path.join(os.path.dirname(__file__), "_C.so"))
"""


@pytest.fixture(scope="module")
def loadable_torchvision(tmp_path_factory) -> Path:
    """A folder holding a `torchvision` package whose `_C.so` loads beside this torch (compiled here, seconds)."""
    compiler = shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler (c++) to build a torchvision library that loads")
    root = tmp_path_factory.mktemp("loadable")
    package = root / "torchvision"
    package.mkdir()
    (package / "__init__.py").write_text(PACKAGE)
    source = root / "library.cpp"
    source.write_text(LIBRARY)
    abi = f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"
    includes = [f"-I{cpp_extension.include_paths()[0]}"]
    libraries = [f"-L{p}" for p in cpp_extension.library_paths()] + ["-lc10", "-ltorch_cpu"]
    command = [compiler, "-O0", "-shared", "-fPIC", "-std=c++20", abi, *includes, str(source), "-o"]
    subprocess.run([*command, str(package / "_C.so"), *libraries], check=True, capture_output=True)
    return root


def _child(program: str, root: Path | None = None) -> subprocess.CompletedProcess:
    """`program` in a fresh interpreter of this venv, with `root` (a stand-in torchvision) first on its path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*([str(root)] if root else []), *sys.path])}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program)],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_where_torchvisions_library_loads_it_defines_the_namespace_and_nothing_is_declared(loadable_torchvision):
    done = _child(
        """
        import os, torch
        from weftlib.rebuild import torchvision_schemas as schemas
        schemas.declare()
        import torchvision  # loads the same library again, as torchvision does: no second definition
        assert not schemas._LIBRARIES, "schemas declared beside a library that defines them"
        assert torch.ops.torchvision.roi_align_probe is not None  # the library's own definitions
        assert schemas.own_library().startswith(os.environ["PYTHONPATH"].split(os.pathsep)[0]), schemas.own_library()
        print("ok")
        """,
        loadable_torchvision,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode, done.stderr[-2000:])


def test_a_schema_declared_before_that_library_loads_aborts_the_process(loadable_torchvision):
    # why `declare()` loads the library first: what declaring first does to a torchvision that loads
    done = _child(
        """
        import torch
        library = torch.library.Library("torchvision", "DEF")
        library.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        import torchvision
        print("imported")
        """,
        loadable_torchvision,
    )
    assert done.returncode != 0 and "imported" not in done.stdout
    assert "Only a single TORCH_LIBRARY can be used to register the namespace torchvision" in done.stderr


WITHOUT_HOOK = """
import sys
from weftlib.rebuild import torchvision_schemas as schemas
sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, schemas.DeclareBeforeTorchvision)]
"""


def test_the_venv_imports_torchvision_through_its_hook_and_not_without_it():
    site = Path(sys.executable).parent.parent / "lib"
    assert list(site.glob(f"python3*/site-packages/{torchvision_schemas.PTH_NAME}")), (
        f"no {torchvision_schemas.PTH_NAME} in this venv: `make` installs it (torchvision_schemas.write_pth)"
    )
    plain = _child("import torchvision, torch; torchvision.models.resnet18; print('ok')")
    assert plain.returncode == 0 and plain.stdout.strip() == "ok", plain.stderr[-2000:]
    if torchvision_schemas.load_own_library():
        pytest.skip("torchvision's own library loads here: it imports with or without the hook")
    bare = _child(WITHOUT_HOOK + "import torchvision")
    assert bare.returncode != 0 and "operator torchvision::nms does not exist" in bare.stderr, bare.stderr[-2000:]
    hooked = _child(WITHOUT_HOOK + "schemas.install_import_hook(); import torchvision; print('ok')")
    assert hooked.returncode == 0 and hooked.stdout.strip() == "ok", hooked.stderr[-2000:]


def test_the_hook_declares_when_torchvision_is_executed_not_when_it_is_looked_up():
    # torch looks torchvision up while it is itself being imported: declaring then left the namespace taken
    # and nothing defined, and the next `declare()` failed (the first CI run of the hook)
    done = _child(
        """
        import importlib.util
        import torch
        from weftlib.rebuild import torchvision_schemas as schemas
        assert not schemas._LIBRARIES, "declared while torch was imported"
        assert importlib.util.find_spec("torchvision") is not None
        assert not schemas._LIBRARIES, "declared on a look-up"
        import torchvision
        assert schemas._defined("torchvision::nms") and torchvision.models.resnet18 is not None
        schemas.declare()
        print("ok")
        """
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
