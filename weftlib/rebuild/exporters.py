"""Each exporter's own build and export, with random weights and nothing downloaded.

- Ultralytics: `YOLO("<model>.yaml")` builds from the packaged yaml; `export(format="onnx", opset, simplify=True)`
  is Ultralytics' own export (TorchScript exporter, then onnxslim), as the zoo's guide runs it.
- timm, torchvision, transformers: the model from its config (`pretrained=False`, `weights=None`, a config
  object), exported by torch's TorchScript exporter (`dynamo=False`), which wrote the zoo's files (their node
  names, `/blocks/blocks.0/attn/...`, are its scope names), then simplified by onnxsim (the DFC's own
  simplifier, and the zoo's `_sim` files).

Every entry writes one file and returns its path; versions are read by `exporter_version` for the cache key.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

from ..onnx_core import export as onnx_export
from .recipes import Exporter, Recipe

PACKAGES = {
    Exporter.ULTRALYTICS: ("ultralytics", "onnxslim"),
    Exporter.TIMM: ("timm", "onnxsim"),
    Exporter.TORCHVISION: ("torchvision", "onnxsim"),
    Exporter.TRANSFORMERS: ("transformers", "onnxsim"),
}


class ExportFailed(RuntimeError):
    """An exporter could not build or export a recipe; the message names the network and the step."""


def exporter_version(exporter: Exporter) -> str:
    """The exporter's and its simplifier's versions, with torch's: what the cache key holds."""
    return "+".join(f"{p}-{version(p)}" for p in (*PACKAGES[exporter], "torch"))


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The exporters' banners, warnings and progress lines kept off the test's and the notebook's output: the ONNX
    core's silence, every logger's warnings too (Ultralytics, timm and transformers log through their own), and
    what C++ prints (onnxsim's "failed to run ... skip" for each node it leaves unfolded, which changes nothing)."""
    logging.disable(logging.WARNING)
    try:
        with onnx_export.quiet(), onnx_export.quiet_fd(1), onnx_export.quiet_fd(2):
            yield
    finally:
        logging.disable(logging.NOTSET)


def export(recipe: Recipe, folder: Path) -> Path:
    """The recipe's model exported (and simplified) into `folder`; its path."""
    from . import torchvision_schemas

    torchvision_schemas.declare()
    build = {
        Exporter.ULTRALYTICS: _ultralytics,
        Exporter.TIMM: _timm,
        Exporter.TORCHVISION: _torchvision,
        Exporter.TRANSFORMERS: _transformers,
    }[recipe.exporter]
    try:
        with _quiet():
            return build(recipe, folder)
    except Exception as error:
        raise ExportFailed(
            f"{recipe.network}: {recipe.exporter} export failed: {type(error).__name__}: {error}"
        ) from error


def _ultralytics(recipe: Recipe, folder: Path) -> Path:
    os.environ.setdefault("YOLO_OFFLINE", "1")  # no update checks, no telemetry
    os.environ.setdefault("YOLO_CONFIG_DIR", str(folder.parent / "ultralytics-config"))
    from ultralytics import YOLO

    model = YOLO(recipe.model) if "nc" not in recipe.kwargs else YOLO(_with_classes(recipe, folder))
    with contextlib.chdir(folder):
        written = model.export(
            format="onnx", imgsz=list(recipe.shape[2:]), opset=recipe.opset, simplify=recipe.simplify, batch=1
        )
    return Path(folder, written).resolve()


def _with_classes(recipe: Recipe, folder: Path) -> str:
    """The packaged yaml with `nc` classes (a custom-trained detector's head), written beside the export."""
    import yaml
    from ultralytics.nn.tasks import yaml_model_load

    config = yaml_model_load(recipe.model)
    config["nc"] = int(str(recipe.kwargs["nc"]))
    path = folder / recipe.model
    path.write_text(yaml.safe_dump(config))
    return str(path)


def _torch_export(model: Any, args: tuple, recipe: Recipe, folder: Path, names: list[str]) -> Path:
    """torch's TorchScript exporter at the recipe's opset, then onnxsim as the recipe says."""
    import onnx
    import torch

    raw = folder / f"{recipe.network}.raw.onnx"
    with torch.no_grad():
        torch.onnx.export(
            model.eval(), args, str(raw), dynamo=False, opset_version=recipe.opset, input_names=names,
            do_constant_folding=True,
        )  # fmt: skip
    path = folder / f"{recipe.network}.onnx"
    graph = onnx.load(str(raw))
    if recipe.simplify:
        from onnxsim import simplify

        graph, ok = simplify(graph)
        if not ok:
            raise ExportFailed(f"{recipe.network}: onnxsim could not check its simplified graph")
    onnx.save(graph, str(path))
    raw.unlink()
    return path


def _image(recipe: Recipe) -> Any:
    import torch

    return torch.randn(*recipe.shape, generator=torch.Generator().manual_seed(0))


def _timm(recipe: Recipe, folder: Path) -> Path:
    import timm

    model = timm.create_model(recipe.model, pretrained=False)
    return _torch_export(model, (_image(recipe),), recipe, folder, ["input"])


def _torchvision(recipe: Recipe, folder: Path) -> Path:
    import torchvision

    family, _, name = recipe.model.rpartition(".")
    where = getattr(torchvision.models, family) if family else torchvision.models
    model = getattr(where, name)(weights=None)
    return _torch_export(model, (_image(recipe),), recipe, folder, ["input"])


def _transformers(recipe: Recipe, folder: Path) -> Path:
    import torch

    kind, *sizes = recipe.model.split(":")
    model, args, names = _TRANSFORMERS[kind](recipe, sizes)
    torch.manual_seed(0)
    return _torch_export(model, args, recipe, folder, names)


def _tokens(recipe: Recipe) -> Any:
    import torch

    return torch.arange(recipe.shape[1], dtype=torch.int64).unsqueeze(0) % 100 + 1


EAGER: dict[str, Any] = {"attn_implementation": "eager"}  # attention as plain ops (MatMul, Softmax), as exported
IMAGENET: dict[str, Any] = {"num_labels": 1000}  # the zoo's classifiers' head


def _tuples(config: Any) -> Any:
    """The config set to return tuples: the exporter takes tensors, not a ModelOutput."""
    config.return_dict = False
    return config


def _clip_text(recipe: Recipe, sizes: list[str]) -> tuple[Any, tuple, list[str]]:
    from transformers import CLIPTextConfig, CLIPTextModel

    width, heads, layers = (int(s) for s in sizes)
    config = CLIPTextConfig(
        vocab_size=49408, hidden_size=width, intermediate_size=4 * width, num_attention_heads=heads,
        num_hidden_layers=layers, max_position_embeddings=recipe.shape[1], **EAGER,
    )  # fmt: skip
    return CLIPTextModel(_tuples(config)), (_tokens(recipe),), ["input_ids"]


def _siglip_text(recipe: Recipe, sizes: list[str]) -> tuple[Any, tuple, list[str]]:
    from transformers import SiglipTextConfig, SiglipTextModel

    width, heads, layers = (int(s) for s in sizes)
    config = SiglipTextConfig(
        hidden_size=width, intermediate_size=4 * width, num_attention_heads=heads, num_hidden_layers=layers,
        max_position_embeddings=recipe.shape[1], **EAGER,
    )  # fmt: skip
    return SiglipTextModel(_tuples(config)), (_tokens(recipe),), ["input_ids"]


def _siglip2_text(recipe: Recipe, sizes: list[str]) -> tuple[Any, tuple, list[str]]:
    from transformers import Siglip2TextConfig, Siglip2TextModel

    width, heads, layers = (int(s) for s in sizes)
    config = Siglip2TextConfig(
        hidden_size=width, intermediate_size=4 * width, num_attention_heads=heads, num_hidden_layers=layers,
        max_position_embeddings=recipe.shape[1], **EAGER,
    )  # fmt: skip
    return Siglip2TextModel(_tuples(config)), (_tokens(recipe),), ["input_ids"]


def _siglip_vision(recipe: Recipe, sizes: list[str]) -> tuple[Any, tuple, list[str]]:
    from transformers import SiglipVisionConfig, SiglipVisionModel

    width, heads, layers, patch = (int(s) for s in sizes)
    config = SiglipVisionConfig(
        hidden_size=width, intermediate_size=4 * width, num_attention_heads=heads, num_hidden_layers=layers,
        patch_size=patch, image_size=recipe.shape[2], **EAGER,
    )  # fmt: skip
    return SiglipVisionModel(_tuples(config)), (_image(recipe),), ["pixel_values"]


def _logits_module() -> type:
    import torch

    class Logits(torch.nn.Module):
        """A classifier returning its logits alone (Swin's tuple output does not trace)."""

        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, pixel_values: Any) -> Any:
            return self.model(pixel_values).logits

    return Logits


def _logits(model: Any) -> Any:
    """`model` returning its logits alone (the class is made on first use: torch is imported late)."""
    return _logits_module()(model)


def _swin(recipe: Recipe, sizes: list[str]) -> tuple[Any, tuple, list[str]]:
    from transformers import SwinConfig, SwinForImageClassification

    embed, depths = int(sizes[0]), [int(d) for d in sizes[1].split(",")]
    config = SwinConfig(image_size=recipe.shape[2], embed_dim=embed, depths=depths, **IMAGENET)
    return _logits(SwinForImageClassification(config)), (_image(recipe),), ["pixel_values"]


def _depth_anything(recipe: Recipe, sizes: list[str]) -> tuple[Any, tuple, list[str]]:
    from transformers import DepthAnythingConfig, DepthAnythingForDepthEstimation

    config = DepthAnythingConfig()  # the small model: a DINOv2-S backbone (384 wide), neck 48..384, fusion 64
    if sizes[0] == "2":
        config.depth_estimation_type = "relative"
    return DepthAnythingForDepthEstimation(_tuples(config)), (_image(recipe),), ["pixel_values"]


_TRANSFORMERS: dict[str, Callable[[Recipe, list[str]], tuple[Any, tuple, list[str]]]] = {
    "clip_text": _clip_text,
    "siglip_text": _siglip_text,
    "siglip2_text": _siglip2_text,
    "siglip_vision": _siglip_vision,
    "swin": _swin,
    "depth_anything": _depth_anything,
}
