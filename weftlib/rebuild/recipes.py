"""Which networks are rebuilt, by which exporter, at what shape and opset, cut where: one `Recipe` each.

Each recipe is a zoo network whose page lists hailo10h (DFC 5.2.0 at the zoo's head: hailo-ai/hailo_model_zoo
`docs/public_models/HAILO10H`, `hailo_model_zoo/cfg/networks/<network>.yaml`), or a case of the public record
whose source names the exporter. The zoo's config gives the input shape (`info.input_shape`, HWC) and the
parser's start and end nodes (`parser.nodes`; a null is the graph's own input or outputs); its `info.source`
names the upstream code, from which the exporter follows. Opsets: the zoo's YOLOv8 retraining guide exports at
opset 11 (`training/yolov8/README.rst`), the record's YOLO sources state theirs; the zoo's ViT files are named
`_ops17`; where nothing states one, 17 (the first with LayerNormalization, as the ViT files) is used and the
recipe says so.

Ultralytics detectors are cut at the head's raw Convs, as the zoo's configs name them (`/model.22/cv2.0/cv2.0.2/Conv`
...); where the zoo names nodes in the exporter's own words and they are found in the export, the rebuild is
shown to be the zoo's graph, else it is inferred from the named source (`cutting.Provenance`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from ..gate.vocabulary import Exporter


class Family(StrEnum):
    """What kind of network: the families the rebuilds span."""

    CNN_CLASSIFIER = "CNN classifier"
    YOLO_DETECTOR = "YOLO detector"
    YOLO_SEG_POSE = "YOLO segmentation or pose"
    VIT = "ViT-family classifier"
    HYBRID = "hybrid conv-attention"
    DEPTH = "depth estimation"
    TEXT_ENCODER = "text encoder"
    IMAGE_ENCODER = "image encoder"
    VIDEO = "video CNN"


ZOO = "hailo-ai/hailo_model_zoo hailo_model_zoo/cfg/networks/{}.yaml @c83fc03 (hailo10h, DFC 5.2.0)"


@dataclass(frozen=True)
class Recipe:
    """One network rebuilt: `model` is what the exporter builds from (a yaml, a timm or torchvision name, a
    transformers config key, `exporters`), `shape` the input as the exporter takes it (NCHW, or tokens)."""

    network: str  # the zoo's network name (or the public record's case name)
    exporter: Exporter
    family: Family
    model: str
    shape: tuple[int, ...]
    opset: int
    source: str  # where the shape, the nodes and the exporter are stated
    ends: tuple[str, ...] = ()  # the nodes to cut after, in the export's names (empty: the graph's outputs)
    start: str = ""  # the node whose data inputs become the graph's input (empty: the graph's own input)
    simplify: bool = True  # as the source did: Ultralytics' own slimming, onnxsim for the rest (the DFC's own)
    opset_stated: bool = True  # False: no source states the opset (17 is used)
    record_case: str = ""  # the public_record case this rebuild stands for, if any
    note: str = ""
    kwargs: dict[str, object] = field(default_factory=dict)


def _yolo_heads(head: str, scales: int = 3, branches: tuple[str, ...] = ("cv2", "cv3"), prefix: str = "") -> tuple:
    """The raw head Convs of an Ultralytics detector: `{head}/{prefix}cvN.i/{prefix}cvN.i.2/Conv`, per scale."""
    return tuple(f"{head}/{prefix}{b}.{i}/{prefix}{b}.{i}.2/Conv" for i in range(scales) for b in branches)


V8, V11 = "/model.22", "/model.23"
SEG_PROTO = ("/model.22/proto/cv3/act/Mul",)


def _ultralytics() -> list[Recipe]:
    rows = []
    for size in "nsmlx":
        rows.append(Recipe(f"yolov8{size}", Exporter.ULTRALYTICS, Family.YOLO_DETECTOR, f"yolov8{size}.yaml",
                           (1, 3, 640, 640), 11, ZOO.format(f"yolov8{size}"), ends=_yolo_heads(V8),
                           note="the zoo's head names the six raw head Convs in its 2.x configs (4b0acd9); its 5.x config cuts none, so the nodes are not compared"))  # fmt: skip
    for size in "nsmlx":
        heads = _yolo_heads(V11)
        rows.append(Recipe(f"yolov11{size}", Exporter.ULTRALYTICS, Family.YOLO_DETECTOR, f"yolo11{size}.yaml",
                           (1, 3, 640, 640), 11, ZOO.format(f"yolov11{size}"), ends=heads,
                           opset_stated=False, note="opset 11 as the zoo's YOLOv8 guide states; none is stated for YOLO11"))  # fmt: skip
    for size in "nsm":
        heads = (*_yolo_heads(V8, branches=("cv2", "cv3", "cv4")), *SEG_PROTO)
        rows.append(Recipe(f"yolov8{size}_seg", Exporter.ULTRALYTICS, Family.YOLO_SEG_POSE, f"yolov8{size}-seg.yaml",
                           (1, 3, 640, 640), 11, ZOO.format(f"yolov8{size}_seg") + "; training/yolov8_seg/README.rst (opset 11)",
                           ends=heads))  # fmt: skip
    for size in "sm":
        heads = _yolo_heads(V8, branches=("cv2", "cv3", "cv4"))
        rows.append(Recipe(f"yolov8{size}_pose", Exporter.ULTRALYTICS, Family.YOLO_SEG_POSE, f"yolov8{size}-pose.yaml",
                           (1, 3, 640, 640), 11, ZOO.format(f"yolov8{size}_pose"), ends=heads))  # fmt: skip
    rows.append(Recipe("yolov8s_bbox_decoding_only", Exporter.ULTRALYTICS, Family.YOLO_DETECTOR, "yolov8s.yaml",
                       (1, 3, 640, 640), 11, ZOO.format("yolov8s_bbox_decoding_only"), ends=_yolo_heads(V8)))  # fmt: skip
    return rows


def _record_yolo() -> list[Recipe]:
    """The public record's YOLO cases, rebuilt by Ultralytics as their sources exported them."""
    return [
        Recipe("benchy-yolov8-det-530", Exporter.ULTRALYTICS, Family.YOLO_DETECTOR, "yolov8n.yaml", (1, 3, 640, 640),
               11, "BENCHY docs/compilation/hailo10h/models.md (640x640, opset 11, cut at the raw head Convs)",
               ends=_yolo_heads(V8), record_case="benchy-yolov8-det-530"),
        Recipe("benchy-yolo11n-det-530", Exporter.ULTRALYTICS, Family.YOLO_DETECTOR, "yolo11n.yaml", (1, 3, 640, 640),
               11, "BENCHY (YOLO11n at opset 11, cut at the head Convs)", ends=_yolo_heads(V11),
               record_case="benchy-yolo11n-det-530"),
        Recipe("ne503-yolov8-det-530", Exporter.ULTRALYTICS, Family.YOLO_DETECTOR, "yolov8n.yaml", (1, 3, 384, 640),
               11, "NE503 (YOLOv8n, two classes, opset 11, 384x640, cut at the raw head Convs)",
               ends=_yolo_heads(V8), record_case="ne503-yolov8-det-530", kwargs={"nc": 2}),
        Recipe("mokt-yolo11n-640", Exporter.ULTRALYTICS, Family.YOLO_DETECTOR, "yolo11n.yaml", (1, 3, 640, 640), 13,
               "MOKT (yolo11n at 640x640, opset 13, cut at the head Convs)", ends=_yolo_heads(V11),
               record_case="mokt-yolo11n-640"),
        Recipe("keff-yolo11l-full-530", Exporter.ULTRALYTICS, Family.YOLO_DETECTOR, "yolo11l.yaml", (1, 3, 640, 640),
               17, "KEFF (YOLO11l at 640x640 as one HEF; the tool exports at opset 17)", ends=_yolo_heads(V11),
               opset_stated=False, record_case="keff-yolo11l-full-530"),
    ]  # fmt: skip


def _timm() -> list[Recipe]:
    rows = []
    for size in ("tiny", "small", "base"):
        rows.append(Recipe(f"vit_{size}", Exporter.TIMM, Family.VIT, f"vit_{size}_patch16_224", (1, 3, 224, 224), 17,
                           ZOO.format(f"vit_{size}") + f" (source rwightman/pytorch-image-models; vit_{size}_patch16_224_ops17.onnx)"))  # fmt: skip
        rows.append(Recipe(f"deit_{size}", Exporter.TIMM, Family.VIT, f"deit_{size}_patch16_224", (1, 3, 224, 224), 17,
                           ZOO.format(f"deit_{size}") + " (source facebookresearch/deit, built on timm's VisionTransformer)",
                           opset_stated=False))  # fmt: skip
    hybrids = {
        "davit_tiny": ("davit_tiny", "source huggingface.co/timm/davit_tiny.msft_in1k"),
        "fastvit_sa12": ("fastvit_sa12", "source apple/ml-fastvit, in timm as fastvit_sa12"),
    }
    for network, (model, words) in hybrids.items():
        rows.append(Recipe(network, Exporter.TIMM, Family.HYBRID, model, (1, 3, 224, 224), 17,
                           ZOO.format(network) + f" ({words})", opset_stated=False))  # fmt: skip
    return rows


def _torchvision() -> list[Recipe]:
    return [
        Recipe("r3d_18", Exporter.TORCHVISION, Family.VIDEO, "video.r3d_18", (1, 3, 16, 112, 112), 17,
               ZOO.format("r3d_18") + " (source pytorch.org/vision; input 112x112x48: 16 frames of 3 channels)",
               opset_stated=False),
        Recipe("keff-resnet50-full-530", Exporter.TORCHVISION, Family.CNN_CLASSIFIER, "resnet50", (1, 3, 224, 224), 17,
               "KEFF (torchvision ResNet50, ImageNet 224x224, one HEF)", opset_stated=False,
               record_case="keff-resnet50-full-530"),
        Recipe("keff-regnetx-full-530", Exporter.TORCHVISION, Family.CNN_CLASSIFIER, "regnet_x_1_6gf", (1, 3, 224, 224),
               17, "KEFF (torchvision regnet_x_1_6gf, one HEF)", opset_stated=False, record_case="keff-regnetx-full-530"),
        Recipe("keff-mobilenetv3-full-530", Exporter.TORCHVISION, Family.CNN_CLASSIFIER, "mobilenet_v3_large",
               (1, 3, 224, 224), 17, "KEFF (torchvision mobilenet_v3_large, one HEF)", opset_stated=False,
               record_case="keff-mobilenetv3-full-530"),
        Recipe("robot-resnet18-int8", Exporter.TORCHVISION, Family.CNN_CLASSIFIER, "resnet18", (1, 3, 480, 640), 17,
               "ROBOT (ACT's torchvision ResNet18 up to layer4, [1, 3, 480, 640] -> [1, 512, 15, 20])",
               ends=("/layer4/layer4.1/relu_1/Relu",), opset_stated=False, record_case="robot-resnet18-int8"),
    ]  # fmt: skip


def _transformers() -> list[Recipe]:
    clip = {
        "clip_vit_b_16_text_encoder": "clip_text:512:8:12",
        "clip_vit_b_32_text_encoder": "clip_text:512:8:12",
        "clip_vit_l_14_text_encoder": "clip_text:768:12:12",
        "clip_vit_l_14_laion2B_text_encoder": "clip_text:768:12:12",
    }
    rows = []
    for network, model in clip.items():
        width = int(model.split(":")[1])
        rows.append(Recipe(network, Exporter.TRANSFORMERS, Family.TEXT_ENCODER, model, (1, 77), 17,
                           ZOO.format(network) + f" (input 1x77x{width}: the embeddings; source huggingface.co CLIP)",
                           start="/embeddings/Add",
                           ends=("/encoder/layers.11/Add_1",), opset_stated=False,
                           note="the zoo's nodes (Add_1 .. Add_1515) are an older exporter's names: cut at the same places, the embeddings' sum and the last layer's residual Add"))  # fmt: skip
    rows.append(Recipe("siglip_b_16_text_encoder", Exporter.TRANSFORMERS, Family.TEXT_ENCODER, "siglip_text:768:12:12",
                       (1, 64), 17, ZOO.format("siglip_b_16_text_encoder") + " (source huggingface.co/google/siglip-base-patch16-224)",
                       start="/embeddings/Add", opset_stated=False,
                       note="start named as the zoo names it; the end is a tensor number (1546) of the zoo's file: the graph's output"))  # fmt: skip
    for network, width, layers in (
        ("tinyclip_vit_8m_16_text_3m_yfcc15m_text_encoder", 512, 3),
        ("tinyclip_vit_39m_16_text_19m_yfcc15m_text_encoder", 512, 6),
        ("tinyclip_vit_40m_32_text_19m_laion400m_text_encoder", 512, 6),
        ("tinyclip_vit_61m_32_text_29m_laion400m_text_encoder", 512, 9),
    ):
        rows.append(Recipe(network, Exporter.TRANSFORMERS, Family.TEXT_ENCODER, f"clip_text:{width}:8:{layers}", (1, 77),
                           17, ZOO.format(network) + f" (input 1x77x{width}; the end node names the last of {layers} layers)",
                           start="/embeddings/Add", ends=(f"/encoder/layers.{layers - 1}/Add_1",), opset_stated=False))  # fmt: skip
    for network in ("siglip2_b_16_text_encoder", "siglip2_b_32_256_text_encoder"):
        rows.append(Recipe(network, Exporter.TRANSFORMERS, Family.TEXT_ENCODER, "siglip2_text:768:12:12", (1, 64), 17,
                           ZOO.format(network) + " (source huggingface.co/google/siglip2-base-*)", start="/embeddings/Add",
                           opset_stated=False, note="the end is a tensor number of the zoo's file: the graph's outputs"))  # fmt: skip
    rows.append(Recipe("siglip_b_16_image_encoder", Exporter.TRANSFORMERS, Family.IMAGE_ENCODER,
                       "siglip_vision:768:12:12:16", (1, 3, 224, 224), 17,
                       ZOO.format("siglip_b_16_image_encoder") + " (source huggingface.co/google/siglip-base-patch16-224)",
                       opset_stated=False))  # fmt: skip
    for network, model in (("swin_tiny", "swin:96:2,2,6,2"), ("swin_small", "swin:96:2,2,18,2")):
        rows.append(Recipe(network, Exporter.TRANSFORMERS, Family.HYBRID, model, (1, 3, 224, 224), 17,
                           ZOO.format(network) + " (source huggingface.co/microsoft/swin-*-patch4-window7-224)",
                           opset_stated=False))  # fmt: skip
    rows.append(Recipe("depth_anything_vits", Exporter.TRANSFORMERS, Family.DEPTH, "depth_anything:1",
                       (1, 3, 224, 224), 17, ZOO.format("depth_anything_vits") + " (source huggingface.co/LiheYoung/depth-anything-small-hf; depth_anything_vits_224X224_sim_hf.onnx)",
                       opset_stated=False))  # fmt: skip
    rows.append(Recipe("depth_anything_v2_vits", Exporter.TRANSFORMERS, Family.DEPTH, "depth_anything:2",
                       (1, 3, 224, 224), 17, ZOO.format("depth_anything_v2_vits") + " (source huggingface.co/depth-anything/Depth-Anything-V2-Small)",
                       opset_stated=False))  # fmt: skip
    return rows


RECIPES: dict[str, Recipe] = {
    r.network: r for r in (*_ultralytics(), *_record_yolo(), *_timm(), *_torchvision(), *_transformers())
}

# The zoo's hailo10h networks with no exporter among the four named by their source: not rebuilt, and why.
NOT_REBUILT: dict[str, str] = {
    "yolov10n": "source THU-MIG/yolov10, none of the four exporters (params/model_zoo.yaml names none)",
    "yolov12n": "source sunsmarterjie/yolov12, none of the four exporters",
    "efficientformer_l1": "source snap-research/EfficientFormer, none of the four exporters",
    "nextvit_small": "source bytedance/Next-ViT, none of the four exporters",
    "levit128": "the zoo's config names no source (LeViT_128_simp.onnx); timm's levit_128 is not named",
    "resmlp12_relu": "a ReLU variant of timm's resmlp_12 (GELU): the zoo's own model, not timm's",
    "vit_base_bn": "a BatchNorm variant of timm's ViT: the zoo's own model",
    "segformer_b0_bn": "a BatchNorm variant of NVlabs/SegFormer: the zoo's own model",
    "regnetx_800mf": "source facebookresearch/pycls, none of the four exporters",
    "repvgg_a1": "source DingXiaoH/RepVGG (its deploy-mode export), none of the four exporters",
    "yolov5s": "source ultralytics/yolov5 (its own export.py), not the ultralytics package's YOLOv5u",
    "clip_vit_b_16_image_encoder": "source openai/CLIP, not a transformers config",
    "fast_sam_s": "its nodes (Conv_261, ...) are an older exporter's numbering, and FastSAM's own model is not a packaged config",
}
