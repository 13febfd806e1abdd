"""The parity file beside an exported graph, `<stem>.parity.json`, written and read in one place: the export's
torch-versus-onnxruntime check, and the graph's identity (the notebook that exported it and what the graph is,
`gate.run_graphs.GraphIdentity`), which the gate reads instead of guessing it from the file name. It imports no
torch, so the gate, which never does, reads it through here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SUFFIX = ".parity.json"
CHECK_KEYS = ("max_abs_diff", "atol", "parity_ok")  # the export's numeric check
IDENTITY = "identity"  # the graph's identity, as its exporter wrote it
PROOF_FOLDER = ".proof"  # `<stem>.proof/` beside `<stem>.onnx`: the run its exporter recorded (`gate.fix.recorded`)


def path(onnx_path: str | os.PathLike) -> Path:
    """Where a graph's parity file lies: `<stem>.parity.json` beside it."""
    return Path(onnx_path).with_suffix(SUFFIX)


def write(onnx_path: str | os.PathLike, check: Mapping[str, Any], identity: Mapping[str, str] | None) -> Path:
    """The parity file of `onnx_path`: the numeric `check` (empty: none was made, as for `gate fix`'s graph of a
    user's ONNX) and the `identity`, where the writer knows it (None: the graph is of unknown identity)."""
    unknown = set(check) - set(CHECK_KEYS)
    if unknown or (check and set(check) != set(CHECK_KEYS)):
        raise ValueError(f"check: expected the keys {list(CHECK_KEYS)} or none, got {sorted(check)}")
    target = path(onnx_path)
    target.write_text(json.dumps({**check, **({IDENTITY: dict(identity)} if identity is not None else {})}))
    return target


def read(onnx_path: str | os.PathLike) -> dict[str, Any] | None:
    """The parity file of `onnx_path` as written, or None where there is none (a user's ONNX); a ValueError
    naming the file where it is not a JSON object."""
    file = path(onnx_path)
    try:
        if not file.is_file():
            return None
    except OSError:  # a name too long for a sidecar beside it (a 250-character model name): none was written
        return None
    try:
        data = json.loads(file.read_text())
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{file.name}: unreadable parity file ({type(exc).__name__})") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{file.name}: a parity file holds a JSON object, got {type(data).__name__}")
    return data
