"""Look at an exported ONNX graph from a notebook: the one entry a notebook calls, whichever way it looks.

Every view works offline. The published page gets `static(...)` (or `figure(...)`): the first nodes drawn by
`graph_drawing`, so the page holds the picture and has nothing to load. In JupyterLab `interactive(...)`
shows netron, served by the Jupyter server itself (`netron_viewer`), and falls back to the static view in a
headless run, where no server stands behind the page. `explore(...)` gives the command that opens a graph
with a per-node overlay in Model Explorer, which netron cannot show.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import onnx

from .. import console, paths
from . import netron_viewer
from .graph_drawing import figure, layout, svg

__all__ = ["explore", "explorer_command", "figure", "interactive", "layout", "static", "svg"]


def static(path: str | os.PathLike | onnx.ModelProto, **kwargs: Any) -> Any:
    """The SVG view as a notebook display object (works in the published HTML: nothing to load)."""
    from IPython.display import HTML

    return HTML(f'<div style="overflow-x:auto">{svg(path, **kwargs)}</div>')


def interactive(
    path: str | os.PathLike,
    *,
    height: int = 600,
    root: Path = paths.REPO_ROOT,
    viewer: Path = netron_viewer.VIEWER_DIR,
    **static_kwargs: Any,
) -> Any:
    """In JupyterLab: netron showing `path`, served by the Jupyter server (see `netron_viewer`). In a headless
    run (the published page): the static SVG view instead, since no server stands behind a page."""
    target = Path(path)
    if not target.is_file():
        raise FileNotFoundError(f"path: no ONNX file at {str(target)!r}")
    if console.headless():
        return static(target, **static_kwargs)
    from IPython.display import HTML

    return HTML(netron_viewer.frame(target, height=height, root=root, viewer=viewer))


def explorer_command(path: str | os.PathLike, node_data: str | os.PathLike) -> str:
    """The command that opens `path` in Model Explorer with `node_data` overlaid, run from the graph's folder
    (`explore` shows it in a notebook; the run index puts it on the graph's link)."""
    relative = os.path.relpath(Path(node_data).resolve(), Path(path).resolve().parent)
    return f"model-explorer {Path(path).name} --node_data_paths={relative} --no_open_in_browser"


def explore(path: str | os.PathLike, node_data: str | os.PathLike) -> Any:
    """How to see `path` in Google's Model Explorer with `node_data` (its node-data JSON) overlaid, so every
    node shows the value given to it (e.g. the side of a cut it runs on); netron takes no overlay (its issue
    #1241). Model Explorer is not started from the kernel: its server blocks the kernel while it lives and
    checks PyPI for a newer version, so the command is given to run beside Lab (`pip install
    ai-edge-model-explorer model-explorer-onnx`, offline once installed)."""
    from IPython.display import Markdown

    target, data = Path(path), Path(node_data)
    for file, what in ((target, "ONNX file"), (data, "node data")):
        if not file.is_file():
            raise FileNotFoundError(f"{what}: no file at {str(file)!r}")
    command = explorer_command(target, data)
    return Markdown(
        f"Open the graph with its overlay in Model Explorer, from the folder `{target.parent.name}/`: `{command}`"
    )
