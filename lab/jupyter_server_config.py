"""The Jupyter server `make lab` starts (`--config`): a notebook saved from Lab is written without the kernel's
`language_info` (scripts/nbstrip.py's `pre_save_hook`), so opening and saving a notebook leaves git clean."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "nbstrip", Path(__file__).resolve().parent.parent / "scripts" / "nbstrip.py"
)
_nbstrip = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_nbstrip)

c = get_config()  # noqa: F821 - the name Jupyter's config loader provides
c.ContentsManager.pre_save_hook = _nbstrip.pre_save_hook
