"""The Jupyter server `make lab` starts (`--config`), so that Lab and git agree on the notebooks:

- a notebook is handed to Lab with the kernel's `language_info` filled in (scripts/nbstrip.py's
  `with_kernel_info`), so Lab finds nothing to change when the kernel starts and the tab does not show unsaved
  changes before any edit;
- a notebook saved from Lab is written without the kernel's `language_info` (`pre_save_hook`), so opening and
  saving one leaves the file as git has it;
- after a save whose filtered content is what git holds (outputs only), the file is re-staged
  (`post_save_hook`), so `git status` is clean while the outputs stay in the working file.
"""

import importlib.util
from pathlib import Path

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

_spec = importlib.util.spec_from_file_location(
    "nbstrip", Path(__file__).resolve().parent.parent / "scripts" / "nbstrip.py"
)
_nbstrip = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_nbstrip)


def _kernel_language_info():
    """What the `weftlib` kernel reports about its language: ipykernel's, on the interpreter that runs both."""
    from ipykernel.ipkernel import IPythonKernel

    return dict(IPythonKernel.language_info)


class NotebookContentsManager(AsyncLargeFileManager):
    """The server's contents manager, handing notebooks out with the kernel's `language_info` filled in."""

    async def get(self, path, content=True, type=None, format=None, **kwargs):
        model = await super().get(path, content=content, type=type, format=format, **kwargs)
        _nbstrip.with_kernel_info(model, _kernel_language_info())
        return model


c = get_config()  # noqa: F821 - the name Jupyter's config loader provides
c.ServerApp.contents_manager_class = NotebookContentsManager
c.ContentsManager.pre_save_hook = _nbstrip.pre_save_hook
c.ContentsManager.post_save_hook = _nbstrip.post_save_hook
