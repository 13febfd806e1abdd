"""Running the Dataflow Compiler's parser, or saying exactly how to run it elsewhere.

`hailo_sdk_client` only installs on Linux x86-64 (here: the DFC image, `image()`). Where it does not import,
the gate prints the `docker run` command instead of pretending; a parse that returns but writes no HAR is not
a pass. The DFC version and the hw arch are written once, in `params/device_ops.yaml`'s `target`; `target()`
reads them (with PyYAML and pydantic, so the image, which has neither, is always given `--arch`).
"""

from __future__ import annotations

import importlib
import os
import shlex
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from types import ModuleType

from .dfc_log import DfcError, DfcResult, read_dfc_log

IMAGE_REPOSITORY = "weftspun-hailo-dfc"  # the DFC image; its tag is the target DFC version
DFC5_ARCHS = ("hailo10h", "hailo15h", "hailo15m", "hailo15l")
DFC3_ARCHS = ("hailo8", "hailo8l", "hailo8r")
REPO_WEFTLIB = Path(__file__).resolve().parent.parent


class DfcUnavailable(RuntimeError):
    """`hailo_sdk_client` does not import here; `command` is what to run instead."""

    def __init__(self, reason: str, command: str) -> None:
        super().__init__(f"the DFC parser is not available here ({reason}); run it in its image:\n{command}")
        self.reason, self.command = reason, command


@lru_cache(maxsize=1)
def target() -> tuple[str, str]:
    """(DFC version, hw arch) the allowlist is a claim about: `params/device_ops.yaml`'s `target`."""
    from .allowlist import load_device_ops  # not at import: the DFC image carries this file without it

    ops = load_device_ops()
    return ops.target_dfc, ops.target_arch


def image() -> str:
    """The Docker image holding the target DFC (`weftspun-hailo-dfc:<version>`)."""
    return f"{IMAGE_REPOSITORY}:{target()[0]}"


def default_arch() -> str:
    """The hw arch a parse targets unless told otherwise: the allowlist's target arch."""
    return target()[1]


def check_arch(arch: str) -> str:
    """The arch, if DFC 5.x can target it; otherwise a ValueError that says which DFC can."""
    if arch in DFC5_ARCHS:
        return arch
    if arch in DFC3_ARCHS:
        raise ValueError(f"arch: {arch} needs DFC 3.x; DFC 5.x targets only {', '.join(DFC5_ARCHS)}")
    raise ValueError(f"arch: unknown hw arch {arch!r}; DFC 5.x targets {', '.join(DFC5_ARCHS)}")


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


def dfc_client() -> tuple[ModuleType | None, str]:
    """The DFC's Python client (`hailo_sdk_client`) if it imports here, else None and why: the one check
    (provenance reports it, the gate runs with it)."""
    try:
        return importlib.import_module("hailo_sdk_client"), ""
    except Exception as exc:  # ImportError, or a broken install
        return None, f"{type(exc).__name__}: {exc}"


def dfc_available() -> tuple[bool, str]:
    """Whether `hailo_sdk_client` imports here, and why not."""
    client, why = dfc_client()
    return client is not None, why


def run_dfc(
    onnx_path: str | os.PathLike,
    arch: str | None = None,
    *,
    har_path: str | os.PathLike | None = None,
    start_node_names: Sequence[str] | None = None,
    end_node_names: Sequence[str] | None = None,
    net_input_shapes: dict | None = None,
) -> DfcResult:
    """Parse `onnx_path` with the DFC's Python API and save the HAR; raises DfcUnavailable where it cannot.

    `arch` defaults to the target's (reading the allowlist); the DFC image always passes it."""
    arch = check_arch(arch or default_arch())
    model = Path(onnx_path)
    if not model.is_file():
        raise FileNotFoundError(f"onnx_path: {model} does not exist")
    client, why = dfc_client()
    if client is None:
        raise DfcUnavailable(why, docker_command(model, arch))
    har = Path(har_path) if har_path else model.with_suffix(f".{arch}.har")
    har.unlink(missing_ok=True)  # a stale HAR must not read as this run's
    version = getattr(client, "__version__", None)
    try:
        runner = client.ClientRunner(hw_arch=arch)
        runner.translate_onnx_model(
            str(model),
            model.stem.replace("-", "_"),
            start_node_names=start_node_names,
            end_node_names=end_node_names,
            net_input_shapes=net_input_shapes,
        )
    except Exception as exc:  # the parser's rejection, or a plain exception from inside it
        return _rejection(exc, arch, version, str(model), model.stem.replace("-", "_"))
    about = DfcResult("unrecognised", arch=arch, dfc_version=version, source=str(model))  # shared by all below
    try:
        runner.save_har(str(har))
    except Exception as exc:
        return replace(about, reason=f"translated, but save_har failed: {type(exc).__name__}: {exc}")
    if not har.is_file():
        return replace(about, reason=f"translated, but no HAR was written at {har}: not a pass")
    return replace(about, verdict="parsed", har=str(har), model=model.stem, reason="translation completed, HAR saved")


def _rejection(exc: Exception, arch: str, version: str | None, source: str, model: str | None = None) -> DfcResult:
    """Turn the parser's exception into a rejection, reading its text the way a log would be read."""
    cls = type(exc)
    line = f"{cls.__module__}.{cls.__name__}: {exc}"
    from_text = read_dfc_log(line)
    errors = from_text.errors or (DfcError(cls.__name__, None, None, str(exc)[:2000]),)
    return DfcResult(
        "rejected",
        errors=errors,
        end_nodes=from_text.end_nodes,
        exception=f"{cls.__name__}: {str(exc)[:2000]}",
        reason=f"{cls.__name__} from translate_onnx_model",
        arch=arch,
        dfc_version=version,
        source=source,
        model=model,
        last_frame=_last_parser_frame(exc),
    )


def _last_parser_frame(exc: Exception) -> str | None:
    """`hailo_sdk_client/...:line in function` of the deepest parser frame (e.g. `_add_input_layers`)."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "hailo_sdk_client" in f.filename]
    if not frames:
        return None
    f = frames[-1]
    return f"{f.filename[f.filename.index('hailo_sdk_client') :]}:{f.lineno} in {f.name}"


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m weftlib.gate.dfc_runner MODEL --arch A --out R.json`: the parse alone, for the DFC image.

    Needs only this file and `dfc_log.py` (a DFC pack carries copies of both), so the image needs no numpy,
    pandas, PyYAML or pydantic. Exit 0 parsed, 1 rejected or unrecognised, 2 no DFC here or a bad argument.
    """
    import argparse
    import json
    import sys

    ap = argparse.ArgumentParser(prog="python -m weftlib.gate.dfc_runner")
    ap.add_argument("model")
    ap.add_argument("--arch", default=None, help="hw arch (default: the allowlist's target arch)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--start-node-names", nargs="*", default=None)
    ap.add_argument("--end-node-names", nargs="*", default=None)
    ap.add_argument("--net-input-shapes", default=None, help="JSON: input name -> shape")
    args = ap.parse_args(argv)
    try:
        shapes = json.loads(args.net_input_shapes) if args.net_input_shapes else None
        result = run_dfc(
            args.model,
            args.arch,
            start_node_names=args.start_node_names,
            end_node_names=args.end_node_names,
            net_input_shapes=shapes,
        )
    except (ValueError, FileNotFoundError, DfcUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    Path(args.out).write_text(result.to_json())
    print(f"{Path(args.model).name}: {result.verdict}: {result.reason}")
    return 0 if result.verdict == "parsed" else 1


if __name__ == "__main__":
    raise SystemExit(main())
