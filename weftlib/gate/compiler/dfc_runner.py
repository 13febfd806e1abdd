"""The Dataflow Compiler's parse, as the DFC image runs it: this file, `dfc_log.py` and the gate's `vocabulary.py`
are all the image carries.

`hailo_sdk_client` only installs on Linux x86-64 (the DFC image). A parse that returns but writes no HAR is not a
pass. Nothing here reads the allowlist (the image has no PyYAML or pydantic): the arch is always given, and
`dfc_target` on the host says which DFC and arch the allowlist is a claim about and how to run this in its image.
Every result carries the sha256 of the graph file it parsed (`dfc_log.file_sha256`), which binds it to that graph.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import traceback
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from types import ModuleType

from ..vocabulary import DfcVerdict
from .dfc_log import DfcError, DfcResult, file_sha256, read_dfc_log

DFC5_ARCHS = ("hailo10h", "hailo15h", "hailo15m", "hailo15l")
DFC3_ARCHS = ("hailo8", "hailo8l", "hailo8r")


class DfcUnavailable(RuntimeError):
    """`hailo_sdk_client` does not import here; `command` is what to run instead."""

    def __init__(self, reason: str, command: str = "") -> None:
        where = f"; run it in its image:\n{command}" if command else ""
        super().__init__(f"the DFC parser is not available here ({reason}){where}")
        self.reason, self.command = reason, command


def check_arch(arch: str) -> str:
    """The arch, if DFC 5.x can target it; otherwise a ValueError that says which DFC can."""
    if arch in DFC5_ARCHS:
        return arch
    if arch in DFC3_ARCHS:
        raise ValueError(f"arch: {arch} needs DFC 3.x; DFC 5.x targets only {', '.join(DFC5_ARCHS)}")
    raise ValueError(f"arch: unknown hw arch {arch!r}; DFC 5.x targets {', '.join(DFC5_ARCHS)}")


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


def parse(
    onnx_path: str | os.PathLike,
    arch: str,
    *,
    har_path: str | os.PathLike | None = None,
    start_node_names: Sequence[str] | None = None,
    end_node_names: Sequence[str] | None = None,
    net_input_shapes: dict | None = None,
) -> DfcResult:
    """Parse `onnx_path` with the DFC's Python API for `arch` and save the HAR; raises DfcUnavailable (without
    a command: `dfc_target.run_dfc` adds it) where the client does not import. The result carries the sha256
    of the file's bytes, read before the parse: the graph it is about."""
    arch = check_arch(arch)
    model = Path(onnx_path)
    if not model.is_file():
        raise FileNotFoundError(f"onnx_path: {model} does not exist")
    client, why = dfc_client()
    if client is None:
        raise DfcUnavailable(why)
    digest = file_sha256(model)
    result = _parse(client, model, arch, har_path, start_node_names, end_node_names, net_input_shapes)
    return replace(result, sha256=digest)


def _parse(
    client: ModuleType,
    model: Path,
    arch: str,
    har_path: str | os.PathLike | None,
    start_node_names: Sequence[str] | None,
    end_node_names: Sequence[str] | None,
    net_input_shapes: dict | None,
) -> DfcResult:
    """`parse`'s work once the client imports."""
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
    about = DfcResult(DfcVerdict.UNRECOGNISED, arch=arch, dfc_version=version, source=str(model))  # shared by all below
    try:
        runner.save_har(str(har))
    except Exception as exc:
        return replace(about, reason=f"translated, but save_har failed: {type(exc).__name__}: {exc}")
    if not har.is_file():
        return replace(about, reason=f"translated, but no HAR was written at {har}: not a pass")
    return replace(
        about, verdict=DfcVerdict.PARSED, har=str(har), model=model.stem, reason="translation completed, HAR saved"
    )


def _rejection(exc: Exception, arch: str, version: str | None, source: str, model: str | None = None) -> DfcResult:
    """Turn the parser's exception into a rejection, reading its text the way a log would be read."""
    cls = type(exc)
    line = f"{cls.__module__}.{cls.__name__}: {exc}"
    from_text = read_dfc_log(line)
    errors = from_text.errors or (DfcError(cls.__name__, None, None, str(exc)[:2000]),)
    return DfcResult(
        DfcVerdict.REJECTED,
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
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "hailo_sdk_client" in f.filename]
    if not frames:
        return None
    f = frames[-1]
    return f"{f.filename[f.filename.index('hailo_sdk_client') :]}:{f.lineno} in {f.name}"


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m weftlib.gate.compiler.dfc_runner MODEL --arch A --out R.json`: the parse alone, for the DFC image.

    Needs only this file, `dfc_log.py` and `vocabulary.py` (a DFC pack carries copies), so the image needs no numpy,
    pandas, PyYAML or pydantic. Exit 0 parsed, 1 rejected or unrecognised, 2 no DFC here or a bad argument.
    """
    ap = argparse.ArgumentParser(prog="python -m weftlib.gate.compiler.dfc_runner")
    ap.add_argument("model")
    ap.add_argument("--arch", required=True, help="hw arch (the host's pack and command always pass it)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--start-node-names", nargs="*", default=None)
    ap.add_argument("--end-node-names", nargs="*", default=None)
    ap.add_argument("--net-input-shapes", default=None, help="JSON: input name -> shape")
    ap.add_argument("--sha256", default=None, help="the graph's hash as the pack wrote it: refused when MODEL differs")
    args = ap.parse_args(argv)
    try:
        if args.sha256 is not None and Path(args.model).is_file() and file_sha256(args.model) != args.sha256:
            raise ValueError(f"{args.model} is not the graph the pack wrote (its sha256 differs): no result written")
        shapes = json.loads(args.net_input_shapes) if args.net_input_shapes else None
        result = parse(
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
    return 0 if result.verdict == DfcVerdict.PARSED else 1


if __name__ == "__main__":
    raise SystemExit(main())
