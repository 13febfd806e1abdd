"""Netron, offline, served by the Jupyter server itself: what `view.interactive` shows in JupyterLab.

Netron's own web files are copied under `outputs/netron-viewer/` and served through Jupyter's `/files/` route,
so the viewer works on a remote Lab and behind any base URL, and no localhost server is started (nor left
running). Netron is made offline on the way: a version stamp of 0.0.0 (netron then sends no telemetry) and a
consent cookie set by a local script (no cookie splash, no request to an outside host); the model opens at
once. `make lab` starts the server at the repository root, which is what makes `outputs/` reachable under
`/files/`.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import uuid
from datetime import UTC, datetime
from pathlib import Path

import jinja2

from .. import paths

VIEWER_DIR = paths.REPO_ROOT / "outputs" / "netron-viewer"
VIEWER_SUFFIXES = (".html", ".js", ".json", ".css", ".png", ".ico")

_OFFLINE_JS = """// Written by weftlib.onnx_core.netron_viewer: netron opens at once, offline. A consent cookie is set before netron's
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
    `frame` puts into an iframe's srcdoc with the server's base URL and the model filled in."""
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


_FRAME = jinja2.Template(
    """<div id="{{ id }}" style="border:1px solid #ccc">
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
</script>""",
    autoescape=True,
)


def frame(path: Path, *, height: int, root: Path, viewer: Path) -> str:
    """The HTML that shows netron with the model at `path` in an iframe's srcdoc, its files read from the
    Jupyter server under `viewer` (which must lie under the server's `root`)."""
    import netron

    folder = viewer_folder(viewer)
    try:
        relative = folder.resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        raise ValueError(
            f"viewer: {folder} is outside the Jupyter server's root {root}; start Lab with "
            "`make lab` (root = the repository)"
        ) from None
    model = _publish_model(path, folder)
    return _FRAME.render(
        id=f"netron-{uuid.uuid4().hex[:8]}",
        height=height,
        name=path.name,
        version=getattr(netron, "__version__", "?"),
        shown=f"{relative}/{model}",
        viewer=relative,
        model=model,
        page=(folder / FRAME_TEMPLATE).read_text(encoding="utf-8"),
        base_mark=BASE_MARK,
        file_mark=FILE_MARK,
    )
