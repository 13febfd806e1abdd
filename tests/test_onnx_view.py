"""graphview (the notebook entry): layered layout of the first nodes (graph_drawing), and netron only when
someone is watching (netron_viewer, served by the Jupyter server)."""

from __future__ import annotations

import re

import onnx
import pytest
from onnx import TensorProto, helper

from weftlib import console
from weftlib.onnx_core import netron_viewer
from weftlib.onnx_core import view as graphview


def _diamond() -> onnx.ModelProto:
    v = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2])  # noqa: E731
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="a"),
        helper.make_node("Neg", ["a"], ["b"], name="b"),
        helper.make_node("Abs", ["a"], ["c"], name="c"),
        helper.make_node("Add", ["b", "c"], ["y"], name="d"),
    ]
    return helper.make_model(
        helper.make_graph(nodes, "g", [v("x")], [v("y")]), opset_imports=[helper.make_opsetid("", 17)]
    )


def test_layout_depths_and_edges():
    placed, edges = graphview.layout(_diamond())
    assert placed == [("a", "Relu", 0, 0), ("b", "Neg", 1, 0), ("c", "Abs", 1, 1), ("d", "Add", 2, 0)]
    assert sorted(edges) == [(0, 1), (0, 2), (1, 3), (2, 3)]
    assert len(graphview.layout(_diamond(), max_nodes=2)[0]) == 2
    with pytest.raises(ValueError, match="max_nodes"):
        graphview.layout(_diamond(), max_nodes=0)


def test_figure_draws_counts_and_graph():
    import matplotlib.pyplot as plt

    fig = graphview.figure(_diamond(), title="t")
    assert len(fig.axes) == 2 and "4 nodes, 4 op types" in fig.axes[0].get_title()
    plt.close(fig)


def test_svg_is_self_contained_and_draws_every_node():
    import xml.etree.ElementTree as ET

    text = graphview.svg(_diamond(), title="diamond", highlight={"Abs"})
    root = ET.fromstring(text)
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg"
    assert len(root.findall(f".//{ns}rect")) == 4 and len(root.findall(f".//{ns}path")) == 4
    labels = [t.text for t in root.iter(f"{ns}text")]
    assert {"Relu", "Neg", "Abs", "Add"} <= set(labels) and "diamond" in labels
    assert "#c0392b" in text  # the highlighted op
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text
    assert all(line == line.rstrip() for line in text.splitlines())


def test_headless_shows_the_static_view_and_starts_nothing(tmp_path, monkeypatch):
    path = tmp_path / "d.onnx"
    onnx.save(_diamond(), str(path))
    import netron

    monkeypatch.setattr(netron, "start", lambda *a, **k: pytest.fail("netron server started"))
    monkeypatch.setenv(console.HEADLESS_ENV, "1")
    shown = graphview.interactive(path)
    assert "<svg" in shown.data and "iframe" not in shown.data
    with pytest.raises(FileNotFoundError, match="path"):
        graphview.interactive(tmp_path / "missing.onnx")


def test_lab_view_is_netron_through_the_jupyter_server_offline(tmp_path, monkeypatch):
    """What a test can see of the Lab view: netron's files under the server root, the page an iframe gets as
    srcdoc (Jupyter's /files/ sandboxes what it serves), no localhost server, nothing loaded from elsewhere.
    (Checked by hand in Chromium against a server that sandboxes /files/ and checks the Referer as Jupyter does.)"""
    import json

    import netron

    root = tmp_path / "repo"
    viewer = root / "outputs" / "netron-viewer"
    path = tmp_path / "d.onnx"
    onnx.save(_diamond(), str(path))
    monkeypatch.setattr(netron, "start", lambda *a, **k: pytest.fail("a localhost netron server was started"))
    monkeypatch.setenv(console.HEADLESS_ENV, "0")
    shown = graphview.interactive(path, root=root, viewer=viewer).data
    assert "localhost" not in shown and ":8080" not in shown and "<iframe" in shown and ".srcdoc =" in shown
    assert '"outputs/netron-viewer"' in shown and 'base + "files/"' in shown and "jupyter-config-data" in shown
    model = re.search(r'"(models/d-[0-9a-f]{12}\.onnx)"', shown).group(1)
    assert (viewer / model).read_bytes() == path.read_bytes()
    line = next(ln.strip() for ln in shown.splitlines() if ln.strip().startswith("var page = "))
    page = json.loads(line[len("var page = ") : -1])
    assert page == (viewer / netron_viewer.FRAME_TEMPLATE).read_text()
    assert (
        f'<base href="{netron_viewer.BASE_MARK}">' in page
        and f'<meta name="file" content="{netron_viewer.FILE_MARK}">' in page
    )
    assert '<meta name="version" content="0.0.0">' in page  # netron's telemetry runs only for packaged versions
    assert page.index("weft-offline.js") < page.index('src="index.js"')
    loaded = re.findall(r'(?:src|href)="([^"]+)"', page.split("</head>")[0])
    assert loaded and all("://" not in url for url in loaded), loaded  # every script and style from the server
    assert "consent=" in (viewer / "weft-offline.js").read_text()
    assert "window.document.baseURI" in (viewer / "index.js").read_text()
    browser = (viewer / "browser.js").read_text()
    assert "new window.URL(this.document.baseURI)" in browser and "serial: true" in browser
    assert (viewer / "onnx.js").is_file() and (viewer / "onnx-metadata.json").is_file()
    with pytest.raises(ValueError, match="outside the Jupyter server's root"):
        graphview.interactive(path, root=tmp_path / "elsewhere", viewer=viewer)


def test_a_changed_netron_is_refused_not_half_patched():
    with pytest.raises(RuntimeError, match=r"netron's index\.js changed"):
        netron_viewer._patched("index.js", "var base = somewhere_else;")


@pytest.mark.parametrize("headless", ["1", "0"])
def test_no_netron_server_is_left_running(tmp_path, monkeypatch, headless):
    """Notebook 02's graph cell starts no localhost server in either mode (netron's files are served by the
    Jupyter server), so there is nothing to stop afterwards: no server thread is alive once the cell ran."""
    import netron

    root = tmp_path / "repo"
    path = tmp_path / "d.onnx"
    onnx.save(_diamond(), str(path))
    for name in ("start", "serve", "widget"):
        monkeypatch.setattr(netron, name, lambda *a, _n=name, **k: pytest.fail(f"netron.{_n} was called"))
    monkeypatch.setenv(console.HEADLESS_ENV, headless)
    assert not netron.status()
    graphview.interactive(path, root=root, viewer=root / "outputs" / "netron-viewer")
    assert not netron.status(), "a netron server thread is still running"
