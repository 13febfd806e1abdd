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

from weftlib import yaml_text
from weftlib.gate.record import zoo
from weftlib.gate.record.zoo import ZooArch
from weftlib.gate.vocabulary import Exporter, ZooField

MIRROR = Path(os.environ.get("WEFT_ZOO_MIRROR", "/work/.mirror/hailo-ai+hailo_model_zoo/repo"))
HAS_MIRROR = shutil.which("git") is not None and (MIRROR / "HEAD").exists()
needs_mirror = pytest.mark.skipif(
    not HAS_MIRROR, reason=f"no git mirror of {zoo.REPOSITORY} at {MIRROR} (set WEFT_ZOO_MIRROR): rows not re-read"
)


@pytest.fixture(scope="module")
def raw() -> dict:
    return yaml.load(zoo.DEFAULT_PATH.read_text(), Loader=yaml_text.SAFE_LOADER)


@pytest.fixture(scope="module")
def committed() -> zoo.Zoo:
    return zoo.load_zoo()


def _small(raw: dict) -> dict:
    """A copy of the file cut to a few rows and one observation (yolov8s), so each bad edit is checked quickly."""
    return copy.deepcopy({**raw, "fps": raw["fps"][:3], "parse": [_obs_data(raw, "yolov8s")]})


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
    data = _small(raw)
    zoo.parse_zoo(data)  # the cut file is well-formed
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


class _Blobs:
    """The mirror's files, read through one `git cat-file --batch` for the whole module: the checks below read
    about two thousand (page, config) versions, and a git process for each took most of their seconds."""

    def __init__(self) -> None:
        self._git: subprocess.Popen[bytes] | None = None

    def read(self, commit: str, path: str) -> bytes | None:
        """The file at the commit, or None where the commit's tree has no such file."""
        if self._git is None:
            command = ["git", "-C", str(MIRROR), "cat-file", "--batch"]
            self._git = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self._git.stdin is not None and self._git.stdout is not None
        self._git.stdin.write(f"{commit}:{path}\n".encode())
        self._git.stdin.flush()
        header = self._git.stdout.readline().split()
        if len(header) != 3:  # "<name> missing" (or ambiguous): no such object
            return None
        blob = self._git.stdout.read(int(header[2]))
        self._git.stdout.read(1)  # the newline after each object
        return blob

    def close(self) -> None:
        if self._git is not None:
            self._git.communicate()
            self._git = None


_BLOBS = _Blobs()


@pytest.fixture(scope="module", autouse=True)
def _close_blobs():
    yield
    _BLOBS.close()


@cache
def _show(commit: str, path: str) -> str:
    blob = _BLOBS.read(commit, path)
    assert blob is not None, f"{path} at {commit[:10]}: not in the mirror"
    return blob.decode()


@cache
def _tables(commit: str, path: str) -> tuple[tuple[str | None, tuple[tuple[str, ...], ...]], ...]:
    """The page's list-tables under a `Network Name` header: (the DFC version the page states last before the
    table, or None; the rows, header first, each a tuple of its cells' text)."""
    tables: list[tuple[str | None, list[list[str]]]] = []
    row: list[str] | None = None
    stated: str | None = None
    for line in _show(commit, path).splitlines():
        if said := re.search(r"compiled using Hailo Dataflow Compiler v?(\d+(?:\.\d+)+)", line):
            stated = said.group(1)
        if line.startswith(".. list-table::"):
            tables.append((stated, []))
            row = None
        elif line and not line[0].isspace():  # text after the table ends it
            row = None
        elif tables and (start := re.fullmatch(r"\s*\* - ?(.*)", line)):
            row = [start.group(1).strip()]
            tables[-1][1].append(row)
        elif row is not None and (cell := re.fullmatch(r"\s+- ?(.*)", line)):
            row.append(cell.group(1).strip())
        elif row is not None and line.strip():
            row[-1] += "\n" + line.strip()  # a cell's second line
    return tuple(
        (version, tuple(tuple(cells) for cells in rows))
        for version, rows in tables
        if rows and rows[0][0] == "Network Name"
    )


@cache
def _page_rows(commit: str, path: str) -> dict[str, dict[str, str]]:
    """The rows of the page's tables by the network name as printed: header -> cell (a row must fill its header)."""
    return {
        cells[0]: dict(zip(header, cells, strict=True))
        for _, (header, *body) in _tables(commit, path)
        for cells in body
    }


def _clean(printed: str) -> str:
    """A printed name without its marks (a star, `|star|`, `|rocket|`)."""
    return re.sub(r"\|\w+\||⭐", "", printed).strip()


@cache
def _listing(commit: str, path: str) -> dict[str, tuple[str | None, tuple[str, ...]]]:
    """Each network the page lists: the DFC version stated over its table, the arch folders its row links into."""
    listed: dict[str, tuple[str | None, tuple[str, ...]]] = {}
    for version, (_, *body) in _tables(commit, path):
        for cells in body:
            links = "\n".join(cells)
            listed[_clean(cells[0])] = (
                version,
                tuple(sorted(set(re.findall(r"/Compiled/v[\d.]+/(hailo\w+)/", links)))),
            )
    return listed


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


# ---- parse observations (issue 42) -----------------------------------------------------------------------------


def test_every_network_with_figures_has_a_parse_observation_seen_on_its_arch(committed: zoo.Zoo) -> None:
    observed = {obs.network: obs for obs in committed.parse_observations()}
    assert committed.parse_observations() == zoo.parse_observations()
    for arch in ZooArch:
        missing = [row.network for row in committed.fps_rows(arch) if row.network not in observed]
        assert not missing, f"{arch} networks with figures but no parse observation: {missing}"
        for row in committed.fps_rows(arch):
            assert any(seen.arch == arch and seen.dfc_version == row.dfc_version for seen in observed[row.network].seen)
    for obs in committed.parse_observations():
        assert all(seen.arch in ("hailo10", "hailo10h", "hailo15h") for seen in obs.seen), obs.network
        assert (obs.config is None) == (obs.config_commit is None)
        if obs.nodes is not None:
            assert obs.nodes.start or obs.nodes.end, obs.network
    on_5x = [obs for obs in committed.parse_observations() if obs.seen_on(ZooArch.HAILO10H)]
    assert len(on_5x) >= 150, "most networks were listed on a hailo10h page under DFC 5.x, compiled for hailo10h"


def test_an_exporter_is_recorded_only_where_its_source_url_names_it(committed: zoo.Zoo) -> None:
    assert zoo.named_exporter("https://github.com/ultralytics/ultralytics") == Exporter.ULTRALYTICS
    assert zoo.named_exporter("https://huggingface.co/timm/resnet50x4_clip.openai") == Exporter.TIMM
    assert zoo.named_exporter("https://github.com/facebookresearch/deit") is None
    assert zoo.named_exporter("https://huggingface.co/openai/clip-vit-base-patch32") is None, "the hub names no library"
    named = {obs.network: obs.exporter for obs in committed.parse_observations() if obs.exporter}
    assert committed.parse_observation("yolov8s").exporter == Exporter.ULTRALYTICS
    with pytest.raises(zoo.ZooError, match="'resnet_v9': no parse observation"):
        committed.parse_observation("resnet_v9")
    assert named["yolov8s"] == Exporter.ULTRALYTICS and named["vit_base"] == Exporter.TIMM
    assert "deit_small" not in named
    for obs in committed.parse_observations():
        assert obs.exporter_reason, obs.network
        assert obs.inferred_exporter is None or obs.exporter is None, obs.network


def _obs_data(raw: dict, network: str) -> dict:
    return next(item for item in raw["parse"] if item["network"] == network)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda o: o.update(onnx="x.onnx"), "unknown key"),
        (lambda o: o.update(exporter="timm"), "exporter: timm but the source URL names ultralytics"),
        (lambda o: o.update(inferred_exporter="timm", inferred_reason="a guess"), "inferred_exporter: only where"),
        (lambda o: o.update(nodes=None, nodes_note=""), "nodes: none; say why in `nodes_note`"),
        (lambda o: o.update(config_commit=None), "config and config_commit: give both or neither"),
        (lambda o: o.update(seen=[]), "seen: empty"),
        (lambda o: o["seen"][0].update(commit="HEAD"), "seen[0].commit: expected a 40-hex commit, got 'HEAD'"),
        (lambda o: o["nodes"].update(end="a"), "nodes.end: Input should be a valid tuple"),
    ],
)
def test_a_malformed_parse_observation_is_refused_in_one_line(raw: dict, edit, expected: str) -> None:
    data = _small(raw)
    edit(data["parse"][0])
    message = _error(data)
    assert expected in message and "parse[0]" in message


def _exists(commit: str, path: str) -> bool:
    """Whether the file is in the commit's tree (a commit that deleted it has none)."""
    return _BLOBS.read(commit, path) is not None


@cache
def _config(commit: str, rel: str) -> dict:
    return yaml.load(_show(commit, f"hailo_model_zoo/cfg/{rel}"), Loader=yaml_text.SAFE_LOADER) or {}


def _chain(commit: str, rel: str) -> list[str]:
    """The config and its `base:` includes, nearest first (a later base overrides an earlier one)."""
    return [rel] + [
        found for base in reversed(_config(commit, rel).get("base") or []) for found in _chain(commit, base)
    ]


def _lookup(commit: str, rel: str, *keys: str) -> tuple[object, str | None]:
    """A key's value in the merged config and the file that sets it (the nearest that names the key)."""
    for found in _chain(commit, rel):
        node: object = _config(commit, found)
        for key in keys:
            if not isinstance(node, dict) or key not in node:
                break
            node = node[key]
        else:
            return node, found
    return None, None


def _as_list(value: object) -> list[object]:
    return [] if value is None else [value] if isinstance(value, str) else [item for item in value if item is not None]


def _nodes(value: object) -> tuple[list[object], list[object]]:
    start, end = value if isinstance(value, list) and len(value) == 2 else (None, None)
    return _as_list(start), _as_list(end)


def _git_lines(*args: str) -> list[str]:
    return subprocess.run(["git", "-C", str(MIRROR), *args], capture_output=True, text=True, check=True).stdout.split()


def _names_nodes(commit: str, config: str) -> bool:
    rel = config.removeprefix("hailo_model_zoo/cfg/")
    return _exists(commit, config) and any(_nodes(_lookup(commit, rel, "parser", "nodes")[0]))


def _config_problems(obs: zoo.ParseObservation, commit: str, rel: str) -> list[str]:
    """The observation's config facts against the merged config at its commit."""
    wrong = []
    if _chain(commit, rel)[1:] != list(obs.bases):
        wrong.append(f"bases {list(obs.bases)}, the config {_chain(commit, rel)[1:]}")
    if _as_list(_lookup(commit, rel, "paths", "network_path")[0]) != list(obs.network_path):
        wrong.append("network_path differs from the config's")
    shape = str(_lookup(commit, rel, "info", "input_shape")[0])
    if [part.strip().lower() for part in shape.split(",")] != list(obs.inputs):
        wrong.append(f"inputs {list(obs.inputs)}, the config {shape!r}")
    if _as_list(_lookup(commit, rel, "info", "supported_hw_arch")[0]) != list(obs.config_archs):
        wrong.append("config_archs differ from the config's info.supported_hw_arch")
    if obs.source_field == ZooField.INFO_SOURCE and _lookup(commit, rel, "info", "source")[0] != obs.source_url:
        wrong.append("source_url is not the config's info.source")
    return wrong


def _nodes_problems(obs: zoo.ParseObservation, config: str, commit: str) -> list[str]:
    """The nodes against the config: at the nodes' commit as recorded, and none named by any newer commit."""
    rel = config.removeprefix("hailo_model_zoo/cfg/")
    if obs.nodes is None:
        named = [old for old in [commit, *_git_lines("rev-list", commit, "--", config)] if _names_nodes(old, config)]
        return [f"no nodes recorded, but the config names them at {named[0][:10]}"] if named else []
    wrong = []
    value, where = _lookup(obs.nodes.commit, rel, "parser", "nodes")
    if _nodes(value) != (list(obs.nodes.start), list(obs.nodes.end)):
        wrong.append(f"nodes {obs.nodes.start} -> {obs.nodes.end}, the config {value}")
    if f"hailo_model_zoo/cfg/{where}" != obs.nodes.config:
        wrong.append(f"nodes set by {where}, not {obs.nodes.config}")
    if obs.nodes.commit != commit:
        newer = [commit, *_git_lines("rev-list", f"{obs.nodes.commit}..{commit}", "--", config)]
        if any(_names_nodes(old, config) for old in newer):
            wrong.append("nodes read at an older commit though a newer one of the config names them")
    return wrong


@needs_mirror
def test_every_parse_observation_matches_its_config_at_its_commit(committed: zoo.Zoo) -> None:
    wrong = []
    for obs in committed.parse_observations():
        if obs.config is None or obs.config_commit is None:
            if _git_lines("rev-list", "-1", "HEAD", "--", f"hailo_model_zoo/cfg/networks/{obs.network}.yaml"):
                wrong.append(f"{obs.network}: no config recorded, but the history has one")
            continue
        rel = obs.config.removeprefix("hailo_model_zoo/cfg/")
        problems = _config_problems(obs, obs.config_commit, rel) + _nodes_problems(obs, obs.config, obs.config_commit)
        wrong += [f"{obs.network}: {problem}" for problem in problems]
    assert not wrong, "\n".join(wrong)


@needs_mirror
def test_every_seen_listing_matches_its_page_at_both_commits(committed: zoo.Zoo) -> None:
    wrong = []
    for obs in committed.parse_observations():
        for seen in obs.seen:
            for commit in (seen.commit, seen.last_commit):
                listed = _listing(commit, seen.page).get(obs.network)
                expected = (seen.dfc_version, tuple(seen.compiled_for))
                if listed != expected:
                    wrong.append(f"{obs.network} on {seen.page} at {commit[:10]}: {expected}, the page {listed}")
    assert not wrong, "\n".join(wrong[:20]) + f"\n({len(wrong)} in all)"
