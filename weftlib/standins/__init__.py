"""Stand-ins for the two repositories notebook 01 studies, because nothing can be downloaded here.

- `NAF_HUB_DIR`: a small torch.hub repository shaped like valeoai/NAF (a `hubconf.py` declaring torch and
  natten, an upsampler with NAF's op families, GroupNorm, its own rotary embedding and index-based nearest
  upsampling, whose parameter-free cross-attention calls `natten.na2d` with NAF's arguments).
- `HOST_ROOT`: a small package shaped like Pixal3D's image conditioning (the four-entry config table, the
  `proj_channels` rule, a local `torch.hub.load` of the upsampler, natten named only in install lines), and,
  laid out like a checkout (`pixal3d/`, `configs/gen/`), the sparse-structure flow model notebook 04 exports.

Both are written for this suite, carry random weights, and say so in their READMEs. They reproduce the
*structure* of the dependency (who calls what, who declares what), not the upstream models' numbers.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

STANDINS_DIR = Path(__file__).resolve().parent
NAF_HUB_DIR = STANDINS_DIR / "naf_hub"
HOST_ROOT = STANDINS_DIR / "pixal_host"
HOST_PACKAGE = "pixal3d_standin"


@contextlib.contextmanager
def on_sys_path(root: Path) -> Iterator[None]:
    """Put a checkout's root first on sys.path for the duration, as running from inside it would."""
    entry = str(root)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(entry)


def import_from(root: str | Path, module: str) -> ModuleType:
    """Import `module` from the checkout at `root` (a module already imported stays as it is)."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"root: {root} is not a directory")
    with on_sys_path(root):
        return importlib.import_module(module)
