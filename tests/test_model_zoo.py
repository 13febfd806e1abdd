"""params/model_zoo.yaml: its schema and its rows held to their sources.

Without the mirror (CI has no network) the file's own checks run: the schema, a source path and a 40-hex commit
on every row, positive figures, unique names, the count issue 46 needs. Where a git mirror of hailo-ai/
hailo_model_zoo exists (`WEFT_ZOO_MIRROR`, else /work/.mirror/...), every cited page and config is re-read at its
commit and each row's figures and nodes checked against it.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest
import yaml

from weftlib.gate.record import zoo
from weftlib.gate.record.zoo import ZooArch

MIRROR = Path(os.environ.get("WEFT_ZOO_MIRROR", "/work/.mirror/hailo-ai+hailo_model_zoo/repo"))
HAS_MIRROR = shutil.which("git") is not None and (MIRROR / "HEAD").exists()
needs_mirror = pytest.mark.skipif(
    not HAS_MIRROR, reason=f"no git mirror of {zoo.REPOSITORY} at {MIRROR} (set WEFT_ZOO_MIRROR): rows not re-read"
)


@pytest.fixture(scope="module")
def raw() -> dict:
    return yaml.safe_load(zoo.DEFAULT_PATH.read_text())


@pytest.fixture(scope="module")
def committed() -> zoo.Zoo:
    return zoo.load_zoo()


def _error(data: dict) -> str:
    with pytest.raises(zoo.ZooError) as caught:
        zoo.parse_zoo(data, "model_zoo.yaml")
    message = str(caught.value)
    assert "\n" not in message, "one line"
    return message


# ---- the file on its own ---------------------------------------------------------------------------------------


def test_the_committed_file_holds_at_least_60_hailo10h_networks_with_fps(committed: zoo.Zoo) -> None:
    rows = committed.fps_rows()
    assert len(rows) >= 60
    assert all(row.arch == ZooArch.HAILO10H for row in rows)
    assert len({row.network for row in rows}) == len(rows), "one row per network and arch"
    assert rows == zoo.fps_rows(ZooArch.HAILO10H), "the module's accessor reads the same file"
    assert {row.arch for row in committed.fps_rows("hailo15h")} == {ZooArch.HAILO15H}


def test_every_row_cites_a_page_and_a_commit_and_its_figures_are_positive(committed: zoo.Zoo) -> None:
    for row in committed.data.fps:
        assert re.fullmatch(r"[0-9a-f]{40}", row.commit), row.network
        assert row.page.startswith(f"docs/public_models/{row.arch.upper()}/"), (row.network, row.page)
        figures = [row.fps_batch1, row.ops_g, row.params_m, *([row.fps_batch8] if row.fps_batch8 else [])]
        assert all(value > 0 for value in figures), row.network
        assert all(part > 0 for part in row.input_shape)
        assert row.printed.replace("⭐", "").strip() == row.network, "the printed name is the network's"


def test_the_file_is_sorted_by_arch_page_then_network(raw: dict) -> None:
    keys = [(row["arch"], row["page"], row["network"]) for row in raw["fps"]]
    assert keys == sorted(keys)


def test_families_follow_the_one_rule_and_span_the_known_architectures(committed: zoo.Zoo) -> None:
    assert zoo.family("yolov8s") == "yolov8" and zoo.family("tiny_yolov4") == "yolov4"
    assert zoo.family("yolov11n") == "yolov11" and zoo.family("yolox_s_leaky") == "yolox"
    assert zoo.family("resnext50_32x4d") == zoo.family("resnet_v1_18") == "resnet"
    assert zoo.family("levit128") == "levit" and zoo.family("deit_tiny") == "deit" and zoo.family("vit_small") == "vit"
    assert zoo.family("tinyclip_vit_8m_16_text_3m_yfcc15m_image_encoder") == "clip"
    groups = committed.families()
    assert sorted(network for names in groups.values() for network in names) == sorted(
        row.network for row in committed.fps_rows()
    )
    assert {"resnet", "mobilenet", "efficientnet", "yolov5", "yolov8", "yolov11", "vit", "deit"} <= set(groups)
    assert len(groups) >= 10, "enough families to hold each out in turn"


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: d["fps"][0].update(colour="red"), "fps[0].colour: unknown key"),
        (lambda d: d["fps"][0].pop("commit"), "fps[0].commit: missing key"),
        (lambda d: d["fps"][0].update(commit="c83fc03"), "fps[0].commit: expected a 40-hex commit, got 'c83fc03'"),
        (lambda d: d["fps"][0].update(fps_batch1=-3), "fps[0].fps_batch1: expected a positive number, got -3"),
        (lambda d: d["fps"][0].update(fps_batch1="fast"), "expected a positive number, got 'fast'"),
        (lambda d: d["fps"][0].update(input="640x640"), "fps[0].input: expected a resolution HxWxC"),
        (lambda d: d["fps"][0].update(arch="hailo8"), "fps[0].arch: Input should be 'hailo10h' or 'hailo15h'"),
        (lambda d: d["fps"][0].update(page="README.md"), "fps[0].page: expected a page path"),
        (lambda d: d["fps"].append(copy.deepcopy(d["fps"][0])), "appears twice"),
        (lambda d: d.update(repository="someone/else"), "repository: expected 'hailo-ai/hailo_model_zoo'"),
    ],
)
def test_a_malformed_file_is_refused_in_one_line_naming_the_place(raw: dict, edit, expected: str) -> None:
    data = copy.deepcopy(raw)
    edit(data)
    assert expected in _error(data)


def test_an_unreadable_or_non_yaml_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(zoo.ZooError, match="cannot read"):
        zoo.load_zoo(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("fps: [\n")
    with pytest.raises(zoo.ZooError, match="not YAML"):
        zoo.load_zoo(bad)


# ---- the rows against their sources ----------------------------------------------------------------------------


@cache
def _show(commit: str, path: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(MIRROR), "show", f"{commit}:{path}"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"{path} at {commit[:10]}: {done.stderr.strip()}"
    return done.stdout


@cache
def _page_rows(commit: str, path: str) -> dict[str, dict[str, str]]:
    """The page's list-table rows under a `Network Name` header, by the name as printed: header -> cell."""
    tables: list[list[list[str]]] = []
    row: list[str] | None = None
    for line in _show(commit, path).splitlines():
        if line.startswith(".. list-table::"):
            tables.append([])
            row = None
        elif line and not line[0].isspace():  # text after the table ends it
            row = None
        elif tables and (start := re.fullmatch(r"\s*\* - ?(.*)", line)):
            row = [start.group(1).strip()]
            tables[-1].append(row)
        elif row is not None and (cell := re.fullmatch(r"\s+- ?(.*)", line)):
            row.append(cell.group(1).strip())
        elif row is not None and line.strip():
            row[-1] += "\n" + line.strip()  # a cell's second line
    rows: dict[str, dict[str, str]] = {}
    for header, *body in (table for table in tables if table and table[0][0] == "Network Name"):
        rows.update({cells[0]: dict(zip(header, cells, strict=True)) for cells in body})
    return rows


def _figure(cell: str) -> float | None:
    return float(cell) if cell else None


@needs_mirror
def test_every_fps_row_matches_its_page_at_its_commit(committed: zoo.Zoo) -> None:
    wrong = []
    for row in committed.data.fps:
        page = _show(row.commit, row.page)
        printed = _page_rows(row.commit, row.page).get(row.printed)
        if printed is None:
            wrong.append(f"{row.network}: {row.printed!r} not a row of {row.page}")
            continue
        expected = {
            "fps_batch1": _figure(printed["FPS (Batch Size=1)"]),
            "fps_batch8": _figure(printed["FPS (Batch Size=8)"]),
            "ops_g": _figure(printed["OPS (G)"]),
            "params_m": _figure(printed["Params (M)"]),
            "input": printed["Input Resolution (HxWxC)"],
        }
        for key, value in expected.items():
            if getattr(row, key) != value:
                wrong.append(f"{row.arch} {row.network}.{key}: {getattr(row, key)!r}, the page {value!r}")
        if f"Dataflow Compiler v{row.dfc_version}" not in page:
            wrong.append(f"{row.network}: {row.page} does not state DFC {row.dfc_version}")
        if not re.search(rf"^{re.escape(row.task)}\n=+$", page, re.M):
            wrong.append(f"{row.network}: {row.page} has no title {row.task!r}")
    assert not wrong, "\n".join(wrong)


@needs_mirror
def test_every_network_with_figures_on_the_cited_pages_has_a_row(committed: zoo.Zoo) -> None:
    """The rows are the pages' whole listing, not a sample."""
    cited = {(row.commit, row.page) for row in committed.data.fps}
    listed = {(commit, printed) for commit, page in cited for printed in _page_rows(commit, page)}
    held = {(row.commit, row.printed) for row in committed.data.fps}
    assert listed == held
