"""Look at an exported ONNX graph: a static SVG of its nodes in published pages, netron in JupyterLab.

Both work offline. The published page gets `svg(...)`: the first nodes of the graph laid out by depth, drawn
here (jinja2), with op counts, so there is nothing to load. In JupyterLab `interactive(...)` shows netron's
own viewer, its files served by the Jupyter server itself (`/files/...`, so it works on a remote Lab and
behind any base URL): its web files are copied under `outputs/netron-viewer/` with a version stamp of 0.0.0
(netron then sends no telemetry) and a consent cookie set by a local script (no cookie splash, no request to
an outside host), and the model opens at once. `make lab` starts the server at the repository root,
which is what makes `outputs/` reachable under `/files/`.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import uuid
from collections import Counter
from datetime import datetime, UTC
from pathlib import Path
from typing import Any

import jinja2
import onnx

from .. import console, paths
from .inventory import inventory

DEFAULT_MAX_NODES = 40
VIEWER_DIR = paths.REPO_ROOT / "outputs" / "netron-viewer"
VIEWER_SUFFIXES = (".html", ".js", ".json", ".css", ".png", ".ico")
_ENV = jinja2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True)


def _model(path: str | os.PathLike | onnx.ModelProto) -> onnx.ModelProto:
    if isinstance(path, onnx.ModelProto):
        return path
    if not Path(path).is_file():
        raise FileNotFoundError(f"path: no ONNX file at {str(path)!r}")
    return onnx.load(str(path), load_external_data=False)


def layout(
    path: str | os.PathLike | onnx.ModelProto, max_nodes: int = DEFAULT_MAX_NODES
) -> tuple[list[tuple[str, str, int, int]], list[tuple[int, int]]]:
    """The first `max_nodes` nodes in graph (topological) order as (name, op_type, layer, slot), where
    layer is the longest path from a graph input, plus the edges (producer index, consumer index)."""
    if max_nodes < 1:
        raise ValueError(f"max_nodes must be >= 1, got {max_nodes}")
    nodes = list(_model(path).graph.node)[:max_nodes]
    producer: dict[str, int] = {}
    depth: list[int] = []
    edges: list[tuple[int, int]] = []
    for i, node in enumerate(nodes):
        parents = sorted({producer[x] for x in node.input if x in producer})
        edges.extend((p, i) for p in parents)
        depth.append(1 + max((depth[p] for p in parents), default=-1))
        producer.update({out: i for out in node.output})
    slots: dict[int, int] = {}
    placed = []
    for node, d in zip(nodes, depth):
        placed.append((node.name, node.op_type, d, slots.get(d, 0)))
        slots[d] = slots.get(d, 0) + 1
    return placed, edges


def figure(
    path: str | os.PathLike | onnx.ModelProto, *, max_nodes: int = DEFAULT_MAX_NODES, title: str | None = None
) -> Any:
    """A matplotlib view: op counts (left) and the first nodes as a layered graph."""
    import matplotlib.pyplot as plt

    model = _model(path)
    ops = inventory(model)
    placed, edges = layout(model, max_nodes)
    fig, (bars, graph) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [1, 2]})
    names = list(ops)[::-1]
    bars.barh(names, [ops[n] for n in names], color="tab:blue")
    bars.set_xlabel("nodes")
    bars.set_title(f"{sum(ops.values())} nodes, {len(ops)} op types")
    for a, b in edges:
        (_, _, xa, ya), (_, _, xb, yb) = placed[a], placed[b]
        graph.plot([xa, xb], [-ya, -yb], color="0.6", lw=0.8, zorder=1)
    for _, op, x, y in placed:
        graph.text(
            x,
            -y,
            op,
            ha="center",
            va="center",
            fontsize=7,
            zorder=2,
            bbox={"boxstyle": "round,pad=0.25", "fc": "white", "ec": "tab:blue"},
        )
    layers = max((p[2] for p in placed), default=0)
    width = max((p[3] for p in placed), default=0)
    graph.set_xlim(-0.8, layers + 0.8)
    graph.set_ylim(-width - 0.8, 0.8)
    graph.axis("off")
    shown = len(placed)
    graph.set_title(f"first {shown} of {len(model.graph.node)} nodes, left to right by depth")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


_SVG = _ENV.from_string("""<svg xmlns="http://www.w3.org/2000/svg" width="{{ width }}" height="{{ height }}" viewBox="0 0 {{ width }} {{ height }}" font-family="system-ui, sans-serif" font-size="11">
<title>{{ title }}</title>
<text x="8" y="16" font-size="13" font-weight="bold">{{ title }}</text>
<text x="8" y="34" fill="#444">{{ subtitle }}</text>
{% for e in edges %}
<path d="M{{ e.x1 }},{{ e.y1 }} C{{ e.cx }},{{ e.y1 }} {{ e.cx }},{{ e.y2 }} {{ e.x2 }},{{ e.y2 }}" fill="none" stroke="#999" stroke-width="1"/>
{% endfor %}
{% for n in nodes %}
<g><title>{{ n.name }} ({{ n.op }})</title><rect x="{{ n.x }}" y="{{ n.y }}" width="{{ box_w }}" height="{{ box_h }}" rx="5" fill="{{ n.fill }}" stroke="{{ n.stroke }}"/>
<text x="{{ n.x + box_w / 2 }}" y="{{ n.y + box_h / 2 + 4 }}" text-anchor="middle">{{ n.op }}</text></g>
{% endfor %}
</svg>""")


def svg(
    path: str | os.PathLike | onnx.ModelProto,
    *,
    max_nodes: int = DEFAULT_MAX_NODES,
    title: str | None = None,
    highlight: set[str] | frozenset[str] = frozenset(),
) -> str:
    """A self-contained SVG of the first `max_nodes` nodes, left to right by depth (ops in `highlight`, e.g.
    those the device gate refuses, drawn red), headed by the op counts of the whole graph."""
    model = _model(path)
    placed, edges = layout(model, max_nodes)
    counts = Counter(n.op_type for n in model.graph.node)
    box_w, box_h, gap_x, gap_y, top = 92, 22, 22, 10, 50
    pos = [(8 + d * (box_w + gap_x), top + s * (box_h + gap_y)) for _, _, d, s in placed]
    nodes = [
        {
            "name": name,
            "op": op,
            "x": x,
            "y": y,
            "fill": "#fde2e2" if op in highlight else "#eef4fb",
            "stroke": "#c0392b" if op in highlight else "#2c6fb7",
        }
        for (name, op, _, _), (x, y) in zip(placed, pos)
    ]
    lines = [
        {
            "x1": pos[a][0] + box_w,
            "y1": pos[a][1] + box_h / 2,
            "x2": pos[b][0],
            "y2": pos[b][1] + box_h / 2,
            "cx": (pos[a][0] + box_w + pos[b][0]) / 2,
        }
        for a, b in edges
    ]
    width = max((x for x, _ in pos), default=0) + box_w + 16
    height = max((y for _, y in pos), default=top) + box_h + 16
    ops = ", ".join(f"{op} {n}" for op, n in counts.most_common())
    subtitle = f"first {len(placed)} of {len(model.graph.node)} nodes; ops: {ops}"
    text = _SVG.render(
        width=max(width, 420),
        height=height,
        title=title or model.graph.name or "ONNX graph",
        subtitle=subtitle,
        nodes=nodes,
        edges=lines,
        box_w=box_w,
        box_h=box_h,
    )
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())


def static(path: str | os.PathLike | onnx.ModelProto, **kwargs: Any) -> Any:
    """The SVG view as a notebook display object (works in the published HTML: nothing to load)."""
    from IPython.display import HTML

    return HTML(f'<div style="overflow-x:auto">{svg(path, **kwargs)}</div>')


# ---- netron, offline, through the Jupyter server ----------------------------------------------------------

_OFFLINE_JS = """// Written by weftlib.onnx_core.view: netron opens at once, offline. A consent cookie is set before netron's
// own scripts run, so it shows no cookie splash and never asks an outside host where the reader is.
document.cookie = 'consent=' + Date.now() + ';path=/;max-age=2592000;SameSite=Lax';
"""
FRAME_TEMPLATE = "weft-frame.html"
BASE_MARK, FILE_MARK = "__WEFT_BASE__", "__WEFT_FILE__"

# Netron finds its modules and files from `window.location`. Inside JupyterLab the viewer runs as an iframe
# `srcdoc` (Jupyter's /files/ route serves every page sandboxed to an opaque origin, where netron's module
# scripts and model fetch would be cross-origin and refused), so it must read them from the document's base
# URL instead, and lay the graph out without a worker (see below); each substitution is checked to apply.
_PATCHES = {
    "index.js": [
        ("var base = window.location.href || '';", "var base = window.document.baseURI || window.location.href || '';")
    ],
    "browser.js": [
        (
            "        const window = this.window;\n        const location = window.location;\n        const pathname",
            "        const window = this.window;\n        const location = new window.URL(this.document.baseURI);\n"
            "        const pathname",
        ),
        # a worker served by /files/ inherits its sandbox (an opaque origin, whose imports the server
        # refuses): netron's "serial" mode lays the graph out in the page instead
        ("            menu: true\n        };", "            menu: true,\n            serial: true\n        };"),
    ],
}


def _patched(name: str, text: str) -> str:
    for old, new in _PATCHES.get(name, []):
        if text.count(old) != 1:
            raise RuntimeError(f"netron's {name} changed: cannot adapt it to run inside JupyterLab ({old[:40]!r})")
        text = text.replace(old, new)
    return text


def viewer_folder(target: Path = VIEWER_DIR) -> Path:
    """Netron's web viewer, copied once per netron version into `target` and made offline: version meta 0.0.0
    (netron's telemetry only runs for packaged versions), today's date (no 'please update' block), and
    `weft-offline.js` (the consent cookie) loaded before netron's scripts; plus `weft-frame.html`, the page
    `interactive` puts into an iframe's srcdoc with the server's base URL and the model filled in."""
    import netron

    source = Path(netron.__file__).parent
    version = getattr(netron, "__version__", "unknown")
    stamp = target / ".netron-version"
    if stamp.is_file() and stamp.read_text() == version and (target / FRAME_TEMPLATE).is_file():
        return target
    target.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        if item.suffix in VIEWER_SUFFIXES and item.name != "index.html":
            if item.name in _PATCHES:
                (target / item.name).write_text(_patched(item.name, item.read_text(encoding="utf-8")), encoding="utf-8")
            else:
                shutil.copy2(item, target / item.name)
    page = (source / "index.html").read_text(encoding="utf-8")
    today = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
    page = re.sub(r'<meta name="version" content="[^"]*">', '<meta name="version" content="0.0.0">', page)
    page = re.sub(r'<meta name="date" content="[^"]*">', f'<meta name="date" content="{today}">', page)
    page = page.replace(
        '<script type="text/javascript" src="index.js"></script>',
        '<script type="text/javascript" src="weft-offline.js"></script>\n'
        '<script type="text/javascript" src="index.js"></script>',
        1,
    )
    (target / "weft-offline.js").write_text(_OFFLINE_JS)
    (target / "index.html").write_text(page, encoding="utf-8")
    frame = page.replace("<head>", f'<head>\n<base href="{BASE_MARK}">\n<meta name="file" content="{FILE_MARK}">', 1)
    (target / FRAME_TEMPLATE).write_text(frame, encoding="utf-8")
    stamp.write_text(version)
    return target


def _publish_model(path: Path, viewer: Path) -> str:
    """The model, linked (or copied) into the viewer's `models/` under a content-derived name; its URL
    relative to the viewer."""
    digest = hashlib.sha256(f"{path.resolve()}:{path.stat().st_mtime_ns}".encode()).hexdigest()[:12]
    models = viewer / "models"
    models.mkdir(exist_ok=True)
    dest = models / f"{path.stem}-{digest}{path.suffix}"
    if not dest.exists():
        try:
            os.link(path, dest)
        except OSError:
            shutil.copy2(path, dest)
    return f"models/{dest.name}"


_FRAME = _ENV.from_string("""<div id="{{ id }}" style="border:1px solid #ccc">
<iframe style="width:100%;height:{{ height }}px;border:0" title="netron: {{ name }}"></iframe>
<div style="font:12px sans-serif;color:#555;padding:2px 6px">netron {{ version }}, served by this Jupyter server from {{ shown }}</div>
</div>
<script>
(function () {
  var el = document.getElementById({{ id | tojson }});
  var base = "/";
  var conf = document.getElementById("jupyter-config-data");
  if (conf) { try { base = JSON.parse(conf.textContent).baseUrl || "/"; } catch (e) {} }
  if (base.slice(-1) !== "/") { base += "/"; }
  var page = {{ page | tojson }};
  el.querySelector("iframe").srcdoc = page.replace({{ base_mark | tojson }}, base + "files/" + {{ viewer | tojson }} + "/")
                                          .replace({{ file_mark | tojson }}, {{ model | tojson }});
})();
</script>""")


def interactive(
    path: str | os.PathLike,
    *,
    height: int = 600,
    root: Path = paths.REPO_ROOT,
    viewer: Path = VIEWER_DIR,
    **static_kwargs: Any,
) -> Any:
    """In JupyterLab: netron showing `path`, served by the Jupyter server (see the module docstring). In a
    headless run (the published page): the static SVG view instead, since no server stands behind a page."""
    target = Path(path)
    if not target.is_file():
        raise FileNotFoundError(f"path: no ONNX file at {str(target)!r}")
    if console.headless():
        return static(target, **static_kwargs)
    import netron
    from IPython.display import HTML

    folder = viewer_folder(viewer)
    try:
        relative = folder.resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        raise ValueError(
            f"viewer: {folder} is outside the Jupyter server's root {root}; start Lab with "
            "`make lab` (root = the repository)"
        ) from None
    model = _publish_model(target, folder)
    return HTML(
        _FRAME.render(
            id=f"netron-{uuid.uuid4().hex[:8]}",
            height=height,
            name=target.name,
            version=getattr(netron, "__version__", "?"),
            shown=f"{relative}/{model}",
            viewer=relative,
            model=model,
            page=(folder / FRAME_TEMPLATE).read_text(encoding="utf-8"),
            base_mark=BASE_MARK,
            file_mark=FILE_MARK,
        )
    )


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
    relative = os.path.relpath(data.resolve(), target.resolve().parent)
    command = f"model-explorer {target.name} --node_data_paths={relative} --no_open_in_browser"
    return Markdown(
        f"Open the graph with its overlay in Model Explorer, from the folder `{target.parent.name}/`: `{command}`"
    )
