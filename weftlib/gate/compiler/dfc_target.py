"""The DFC the allowlist is a claim about, and how to run its parse where it is not installed.

The DFC version and the hw arch are written once, in `params/device_ops.yaml`'s `target`; `target()` reads them.
Where `hailo_sdk_client` does not import, `run_dfc` raises with the exact `docker run` that parses the graph in
the DFC's image (`image()`) instead of pretending. The suite ships no image (the DFC wheel is Hailo's, behind a
login): `image_lines` says which one a parse needs, where the README says to get it, and whether the target DFC
takes the graph's opset as far as the record knows.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import onnx

from ...onnx_core.walk import default_opset
from ..record.allowlist import load_device_ops
from .dfc_log import DfcResult
from .dfc_runner import DfcUnavailable, check_arch, parse

IMAGE_REPOSITORY = "weftspun-hailo-dfc"  # the DFC image; its tag is the target DFC version
REPO_WEFTLIB = Path(__file__).resolve().parents[2]  # weftlib/, mounted whole into the image
IMAGE_HOWTO = "README.md, 'On real checkouts, and with the DFC'"  # where a user reads how to build the image


@lru_cache(maxsize=1)
def target() -> tuple[str, str]:
    """(DFC version, hw arch) the allowlist is a claim about: `params/device_ops.yaml`'s `target`."""
    ops = load_device_ops()
    return ops.target_dfc, ops.target_arch


def image() -> str:
    """The Docker image holding the target DFC (`weftspun-hailo-dfc:<version>`)."""
    return f"{IMAGE_REPOSITORY}:{target()[0]}"


def opset_word(opset: int | None) -> str:
    """Whether the target DFC takes a graph's default-domain opset, as far as `params/device_ops.yaml`'s
    `compiler.opsets` (the opsets the DFC parsed in practice) says; only the parse itself settles it."""
    ops = load_device_ops()
    low, high = ops.opsets
    said = f"the opsets params/device_ops.yaml gives DFC {ops.target_dfc} (compiler.opsets)"
    if opset is None:
        return f"no default-domain opset import: DFC {ops.target_dfc} has no opset to read the ops by"
    if low <= opset <= high:
        return f"opset {opset}: within {low}-{high}, {said}; the parse settles it"
    return f"opset {opset}: outside {low}-{high}, {said}: re-export at an opset inside it"


def image_lines(onnx_path: str | os.PathLike) -> list[str]:
    """What a parse of `onnx_path` needs where no DFC is installed: the image, where the README says to get
    it, and whether the target DFC takes the graph's opset."""
    try:
        takes = opset_word(default_opset(onnx.load(os.fspath(onnx_path), load_external_data=False)))
    except Exception as exc:  # not an ONNX file at all: the parse will say so; the opset is just unknown here
        takes = f"the graph's opset could not be read ({type(exc).__name__})"
    dfc = target()[0]
    return [
        f"image: {image()} (DFC {dfc}, {default_arch()}); the suite ships none: build it from Hailo's DFC {dfc} "
        f"wheel as {IMAGE_HOWTO} says",
        takes,
    ]


def default_arch() -> str:
    """The hw arch a parse targets unless told otherwise: the allowlist's target arch."""
    return target()[1]


def _docker_run(model: Path, *options: str) -> list[str]:
    """`docker run` in the DFC image with the model's folder mounted at /model as the working directory."""
    return ["docker", "run", "--rm", "-v", f"{model.parent}:/model", *options, "-w", "/model", image()]


def docker_command(onnx_path: str | os.PathLike, arch: str | None = None, out: str | None = None) -> str:
    """The exact `docker run` that parses `onnx_path` in the DFC image and writes the JSON result.

    The model's folder is mounted at /model and this checkout's weftlib read-only at /weft, so the image
    needs nothing but the DFC; the result lands next to the model as `<stem>.dfc.json`, or at `out` (its
    folder mounted at /out when it is another one). `arch` defaults to the target's.
    """
    arch = check_arch(arch or default_arch())
    model = Path(onnx_path).resolve()
    mounts = ["-v", f"{REPO_WEFTLIB}:/weft/weftlib:ro", "-e", "PYTHONPATH=/weft"]
    result = f"/model/{model.stem}.dfc.json"
    if out:
        target = Path(out).resolve()
        if target.parent == model.parent:
            result = f"/model/{target.name}"
        else:
            mounts += ["-v", f"{target.parent}:/out"]
            result = f"/out/{target.name}"
    inner = ["python", "-m", "weftlib.gate", "dfc", f"/model/{model.name}", "--arch", arch, "--out", result]
    return shlex.join([*_docker_run(model, *mounts), *inner])


def cli_docker_command(onnx_path: str | os.PathLike, arch: str | None = None) -> str:
    """The same parse through the DFC's own CLI (`hailo parser onnx`), its log saved next to the model."""
    arch = check_arch(arch or default_arch())
    model = Path(onnx_path).resolve()
    outer = [
        *_docker_run(model),
        "hailo",
        "parser",
        "onnx",
        f"/model/{model.name}",
        "--hw-arch",
        arch,
    ]
    return f"{shlex.join(outer)} > {shlex.quote(str(model.parent / (model.stem + '.dfc.log')))} 2>&1"


def run_dfc(
    onnx_path: str | os.PathLike,
    arch: str | None = None,
    *,
    har_path: str | os.PathLike | None = None,
    start_node_names: Sequence[str] | None = None,
    end_node_names: Sequence[str] | None = None,
    net_input_shapes: dict | None = None,
) -> DfcResult:
    """`dfc_runner.parse` here, `arch` defaulting to the target's; where the DFC does not import, DfcUnavailable
    carries the `docker run` that parses the graph in its image."""
    arch = check_arch(arch or default_arch())
    try:
        return parse(
            onnx_path,
            arch,
            har_path=har_path,
            start_node_names=start_node_names,
            end_node_names=end_node_names,
            net_input_shapes=net_input_shapes,
        )
    except DfcUnavailable as exc:
        raise DfcUnavailable(exc.reason, docker_command(onnx_path, arch)) from None
