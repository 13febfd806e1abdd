"""The vendor's model zoo as data: `params/model_zoo.yaml` read into typed rows.

hailo-ai/hailo_model_zoo publishes, per arch and task, a page of the networks it compiled with the DFC version
the page states: FPS at batch 1 and 8, OPS, parameters and input resolution (issue 46 fits device time on them),
and, per network, a config naming the parser's start and end nodes, the ONNX file and the source repository
(issue 42 weighs those as parse observations). Only facts are kept, each with the page or config it was read
from and the commit it was read at, so a test can hold every row to its source. The family of a network is
derived here from its name, by one ordered rule, so held-out validation groups the same way everywhere.
"""

from __future__ import annotations

import re
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from ...formatting import place
from ...paths import REPO_ROOT
from ..vocabulary import Exporter, ZooField

DEFAULT_PATH = REPO_ROOT / "params" / "model_zoo.yaml"
REPOSITORY = "hailo-ai/hailo_model_zoo"


class ZooArch(StrEnum):
    """The archs whose public-models pages the file reads (two of `compiler.dfc_runner.DFC5_ARCHS`, which spells
    them as plain strings: the words stay here, out of the vocabulary, until that tuple is written in them)."""

    HAILO10H = "hailo10h"
    HAILO15H = "hailo15h"


class ZooError(ValueError):
    """The zoo file is malformed: one line, the file and the place in it."""


def _problem(text: str) -> PydanticCustomError:
    return PydanticCustomError("zoo", "{problem}", {"problem": text})


def _matching(pattern: str, what: str) -> Any:
    compiled = re.compile(pattern)

    def check(value: object) -> str:
        if not isinstance(value, str) or not compiled.fullmatch(value):
            raise _problem(f"expected {what}, got {value!r}")
        return value

    return BeforeValidator(check)


def _positive(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise _problem(f"expected a positive number, got {value!r}")
    return float(value)


PageArch = Annotated[str, _matching(r"hailo\d+[a-z]*", "an arch such as hailo10h")]
Shape = Annotated[str, _matching(r"[1-9]\d*(x[1-9]\d*)+", "a shape such as 640x640x3")]
ConfigRel = Annotated[str, _matching(r"\S+\.yaml", "a config path under hailo_model_zoo/cfg/")]
Commit = Annotated[str, _matching(r"[0-9a-f]{40}", "a 40-hex commit")]
Version = Annotated[str, _matching(r"\d+(\.\d+)+", "a version such as 5.2.0")]
Resolution = Annotated[str, _matching(r"[1-9]\d*x[1-9]\d*x[1-9]\d*", "a resolution HxWxC such as 640x640x3")]
PagePath = Annotated[str, _matching(r"docs/[^\n]+\.rst", "a page path docs/....rst")]
ConfigPath = Annotated[str, _matching(r"hailo_model_zoo/cfg/\S+\.yaml", "a config path hailo_model_zoo/cfg/....yaml")]
Name = Annotated[str, _matching(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", "a network name")]
Text = Annotated[str, _matching(r"\S.*", "a non-empty string")]
Url = Annotated[str, _matching(r"https?://\S+", "a URL")]
Positive = Annotated[float, BeforeValidator(_positive)]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# A family groups networks of one architecture for held-out validation: the first rule whose pattern matches the
# network's name gives it (a group of the pattern may be named in the family); a name no rule matches is its own
# leading run of letters (`levit128` -> levit, `hardnet39ds` -> hardnet).
FAMILY_RULES: tuple[tuple[str, str], ...] = (
    (r"(?:tiny_)?yolov(\d+)", r"yolov\1"),
    (r"yolo_world", "yolo_world"),
    (r"tinyclip_|clip_", "clip"),
    (r"siglip", "siglip"),
    (r"vit_pose", "vit_pose"),
    (r"cas_vit", "cas_vit"),
    (r"(?:face_attr_|person_attr_)?resne(?:t|xt)", "resnet"),
    (r"ssd_", "ssd"),
    (r"scdepth", "scdepth"),
    (r"fast_depth", "fast_depth"),
    (r"fast_sam", "fast_sam"),
    (r"depth_anything", "depth_anything"),
    (r"real_esrgan", "real_esrgan"),
    (r"zero_dce", "zero_dce"),
    (r"paddle_ocr", "paddle_ocr"),
    (r"face_landmarks|hand_landmark", "mediapipe_landmarks"),
    (r"r3d", "r3d"),
    (r"regnetx", "regnet"),
    (r"repvgg", "repvgg"),
)


# The exporter a source URL names: only the exporter's own repository (or timm's hub organisation) names it.
EXPORTER_SOURCES: tuple[tuple[str, Exporter], ...] = (
    (r"https?://github\.com/ultralytics/", Exporter.ULTRALYTICS),
    (r"https?://github\.com/(?:rwightman|huggingface)/pytorch-image-models", Exporter.TIMM),
    (r"https?://huggingface\.co/timm/", Exporter.TIMM),
    (r"https?://(?:pytorch\.org/vision|github\.com/pytorch/vision)", Exporter.TORCHVISION),
    (r"https?://github\.com/huggingface/transformers", Exporter.TRANSFORMERS),
)


def named_exporter(url: str | None) -> Exporter | None:
    """The exporter `url` names by `EXPORTER_SOURCES`, or None."""
    return next((exporter for pattern, exporter in EXPORTER_SOURCES if url and re.match(pattern, url)), None)


def family(network: str) -> str:
    """The network's family by `FAMILY_RULES`."""
    for pattern, name in FAMILY_RULES:
        found = re.match(pattern, network)
        if found:
            return found.expand(name)
    leading = re.match(r"[a-z]+", network.lower())
    if leading is None:
        raise ZooError(f"network {network!r}: no family (its name starts with no letter)")
    return leading.group()


class FpsRow(_Record):
    """One network's row of a public-models page: the published figures, the page, the commit it was read at."""

    network: Name
    printed: Text  # the table's network name as printed (a star marks the vendor's apps)
    arch: ZooArch
    task: Text  # the page's title
    dataset: Text  # the table's section
    fps_batch1: Positive
    fps_batch8: Positive | None  # None: the page prints none
    ops_g: Positive
    params_m: Positive
    input: Resolution
    dfc_version: Version
    page: PagePath
    commit: Commit
    note: str = ""

    @property
    def family(self) -> str:
        return family(self.network)

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """(H, W, C) as the page prints it."""
        height, width, channels = (int(part) for part in self.input.split("x"))
        return height, width, channels


class Nodes(_Record):
    """The parser's start and end nodes as a config names them (`parser: nodes: [start, end]`), at `commit`."""

    start: tuple[Text, ...]  # empty: the graph's own inputs
    end: tuple[Text, ...]  # empty: the graph's own outputs
    config: ConfigPath  # the file of the merged config that names them (the network's own or a base)
    commit: Commit
    note: str = ""  # where they were read at another commit than the observation's config


class Seen(_Record):
    """A page that listed the network, as it stood from `commit` to `last_commit` (by commit date)."""

    arch: PageArch  # the arch the page's file name names (HAILO10_ pages were hailo10)
    compiled_for: tuple[PageArch, ...]  # the arch folders the row's compiled-model links point into
    dfc_version: Version | None  # the DFC version the page states over the row's table; None: it states none
    page: PagePath
    commit: Commit  # the first commit at which the page lists it so
    last_commit: Commit  # the last

    @property
    def dfc_major(self) -> int | None:
        return None if self.dfc_version is None else int(self.dfc_version.split(".")[0])


class ParseObservation(_Record):
    """A network the vendor parsed and compiled: its config's facts, its exporter where its source names one."""

    network: Name
    inputs: tuple[Shape, ...]  # the config's `info.input_shape` (the page's resolution where there is no config)
    config: ConfigPath | None  # None: no config of this name at any commit
    config_commit: Commit | None
    bases: tuple[ConfigRel, ...] = ()  # the `base:` includes followed, nearest first
    network_path: tuple[Text, ...]
    config_archs: tuple[PageArch, ...] = ()  # the config's `info: supported_hw_arch` (a page may list others)
    nodes: Nodes | None  # None: no commit of the config names nodes
    nodes_note: str = ""
    source_url: Url | None
    source_field: ZooField | None
    exporter: Exporter | None  # only where the source URL is the exporter's own repository
    exporter_reason: Text  # why this exporter, or why none
    inferred_exporter: Exporter | None = None  # where the source does not name it but another fact points to it
    inferred_reason: str = ""
    seen: tuple[Seen, ...]

    @model_validator(mode="after")
    def _consistent(self) -> ParseObservation:
        if not self.inputs:
            raise _problem("inputs: empty")
        if not self.seen:
            raise _problem("seen: empty; a parse observation is a page that listed it")
        if (self.config is None) != (self.config_commit is None):
            raise _problem("config and config_commit: give both or neither")
        if (self.source_url is None) != (self.source_field is None):
            raise _problem("source_url and source_field: give both or neither")
        if self.nodes is None and not self.nodes_note:
            raise _problem("nodes: none; say why in `nodes_note`")
        if self.exporter != named_exporter(self.source_url):
            raise _problem(
                f"exporter: {self.exporter} but the source URL names {named_exporter(self.source_url)} (EXPORTER_SOURCES)"
            )
        if self.inferred_exporter is not None and (self.exporter is not None or not self.inferred_reason):
            raise _problem("inferred_exporter: only where no exporter is named, and with its `inferred_reason`")
        return self

    @property
    def family(self) -> str:
        return family(self.network)

    def seen_on(self, arch: ZooArch | str, dfc_major: int = 5) -> tuple[Seen, ...]:
        """The listings of a page of `arch` whose rows link models compiled for `arch` (or link none) under a
        stated DFC of `dfc_major`: the observations a parse on that arch and DFC rests on."""
        wanted = ZooArch(arch)
        return tuple(
            seen
            for seen in self.seen
            if seen.arch == wanted and seen.dfc_major == dfc_major and wanted in (seen.compiled_for or (wanted,))
        )


class ZooFile(_Record):
    """The whole file."""

    repository: Text
    fps: tuple[FpsRow, ...]
    parse: tuple[ParseObservation, ...] = ()

    @model_validator(mode="after")
    def _unique(self) -> ZooFile:
        if self.repository != REPOSITORY:
            raise _problem(f"repository: expected {REPOSITORY!r}, got {self.repository!r}")
        _once("fps", [(row.arch, row.network) for row in self.fps])
        _once("parse", [obs.network for obs in self.parse])
        return self


def _once(where: str, keys: list[Any]) -> None:
    seen: set[Any] = set()
    for key in keys:
        if key in seen:
            raise _problem(f"{where}: {key!r} appears twice")
        seen.add(key)


class Zoo:
    """The checked file, with the accessors its readers use."""

    def __init__(self, data: ZooFile) -> None:
        self.data = data

    def fps_rows(self, arch: ZooArch | str = ZooArch.HAILO10H) -> tuple[FpsRow, ...]:
        """The rows of one arch with published FPS, in the file's order (page, then network)."""
        wanted = ZooArch(arch)
        return tuple(row for row in self.data.fps if row.arch == wanted)

    def parse_observations(self) -> tuple[ParseObservation, ...]:
        return self.data.parse

    def parse_observation(self, network: str) -> ParseObservation:
        """One network's observation; a `ZooError` naming the network where the file has none."""
        found = next((obs for obs in self.data.parse if obs.network == network), None)
        if found is None:
            raise ZooError(f"network {network!r}: no parse observation in the zoo file")
        return found

    def families(self, arch: ZooArch | str = ZooArch.HAILO10H) -> dict[str, tuple[str, ...]]:
        """Family -> its networks with FPS rows on `arch`, both sorted."""
        grouped: dict[str, list[str]] = {}
        for row in self.fps_rows(arch):
            grouped.setdefault(row.family, []).append(row.network)
        return {name: tuple(sorted(grouped[name])) for name in sorted(grouped)}


def parse_zoo(data: object, source: str = "<memory>") -> Zoo:
    """The zoo from YAML data; a `ZooError` naming the first place wrong."""
    try:
        return Zoo(ZooFile.model_validate(data))
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(part for part in err["loc"] if part != "[key]")
        if err["type"] == "extra_forbidden":
            problem = "unknown key"
        elif err["type"] == "missing":
            problem = "missing key"
        else:
            problem = err["msg"]
        more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
        raise ZooError(f"{source}: {place(loc, 'file')}: {problem}{more}") from None


def load_zoo(path: str | Path | None = None) -> Zoo:
    """Read and check the zoo file (default `params/model_zoo.yaml`)."""
    import yaml

    from ...yaml_text import SAFE_LOADER

    source = Path(path) if path is not None else DEFAULT_PATH
    try:
        data = yaml.load(source.read_text(), Loader=SAFE_LOADER)
    except OSError as exc:
        raise ZooError(f"{source}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ZooError(f"{source}: not YAML: {str(exc).splitlines()[0]}") from None
    return parse_zoo(data, str(source))


@cache
def committed() -> Zoo:
    """`params/model_zoo.yaml` as committed, read once."""
    return load_zoo()


def fps_rows(arch: ZooArch | str = ZooArch.HAILO10H) -> tuple[FpsRow, ...]:
    """The committed file's FPS rows of `arch`."""
    return committed().fps_rows(arch)


def parse_observations() -> tuple[ParseObservation, ...]:
    """The committed file's parse observations."""
    return committed().parse_observations()


def families(arch: ZooArch | str = ZooArch.HAILO10H) -> dict[str, tuple[str, ...]]:
    """The committed file's families of `arch`'s FPS networks."""
    return committed().families(arch)
