"""Reading what the Hailo Dataflow Compiler printed: parsed, rejected (on which nodes), or unrecognised.

The DFC's verdict arrives as text: a CLI log, a Python traceback, a quote pasted into an issue. The reader
works line by line in linear time (logs can be large and may carry binary junk), tolerates indentation,
comment prefixes, wrapped and flattened lines and truncation, and never calls anything a pass unless a
translation visibly completed before any parser error. What it cannot classify is `unrecognised`.

A result is bound to the graph it is about by `sha256`, the hash of the ONNX file's bytes as the parser read them
(`file_sha256`; weights in an external data file are not hashed: the parse judges the operators, which the file
holds). The parse writes it (`dfc_runner`); a raw log carries none, so a result read from text is *unbound* and
can be matched to a graph by the model name it prints, at best (`pairing`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from ..vocabulary import DfcVerdict, FailureCause

RESULT_KIND = "weftlib.gate/dfc-result"

# Every pattern is either anchored or has bounded repeats, so one line costs time linear in its length.
_ERROR = re.compile(r"\b([A-Za-z_]\w{0,120})\s+in\s+op\s+(\S.{0,400}?):(?=\s|$)")
_COMPLETED = re.compile(r"Translation completed on ONNX model\s+(\S{1,400})")
_STARTED = re.compile(r"Translation started on ONNX model\s+(\S{1,400})")
_HAR = re.compile(r"(?:Saved HAR to:|Saved Hailo Archive file at)\s+(\S.{0,1000})")
_FRAME = re.compile(r'File "([^"]{1,2000})", line (\d{1,9}), in (\S{1,200})')
_PLEASE = re.compile(r"Please try to parse the model again, using these end node names:\s*(.{0,100000})")
_CLI_RECOMMEND = re.compile(r"Parsing failed with recommendations for end node names:\s*(.{0,100000})")
_QUOTED = re.compile(r"'([^']{1,1000})'|\"([^\"]{1,1000})\"")
_PREFIX = re.compile(r"^(?:\s|#|>|//|\*|\|){0,200}(?:\[(?:info|warning|error|debug)\]\s{0,20})?", re.IGNORECASE)
_TRANSLATED_FROM = re.compile(r"\(translated from\s+(\S{1,400}?)\)")
_OP_NAMED = (
    re.compile(r"\b([A-Za-z]\w{0,80}) operation is unsupported"),
    re.compile(r"\bop=([A-Za-z]\w{0,80})"),
    re.compile(r"\(([A-Za-z]\w{0,80})\)\s{0,20}\.?\s{0,20}$"),
)
_CONTROL = {c: " " for c in (*range(0, 9), 11, 12, *range(14, 32), 127)}
_SHA256 = re.compile(r"[0-9a-f]{64}")


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes, hex: the graph a DFC result is bound to (module docstring). Read in blocks,
    so a large graph costs no more memory than a small one."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class DfcError:
    """One error the DFC reported: its class, the ONNX node it names, the op type when the text names it."""

    cls: str
    node: str | None
    op: str | None
    message: str


@dataclass(frozen=True)
class DfcResult:
    """The DFC's verdict on one model, from a log or from running the parser."""

    verdict: DfcVerdict
    errors: tuple[DfcError, ...] = ()
    end_nodes: tuple[str, ...] = ()
    har: str | None = None
    model: str | None = None
    exception: str | None = None
    last_frame: str | None = None
    later_failure: str | None = None
    reason: str = ""
    arch: str | None = None
    dfc_version: str | None = None
    source: str | None = None
    sha256: str | None = None  # of the graph's file (`file_sha256`): what binds the result to it; None: unbound

    def to_json(self) -> str:
        return json.dumps({"kind": RESULT_KIND, **asdict(self)}, indent=2)

    @classmethod
    def from_json(cls, text: str, where: str = "<json>") -> DfcResult:
        """Read what `to_json` wrote (the `dfc` CLI's --out); anything else is a ValueError naming `where`."""
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:  # RecursionError: nested past Python's reach
            raise ValueError(f"{where}: not JSON a DFC result holds ({type(exc).__name__}: {exc})") from None
        if not isinstance(data, dict) or data.pop("kind", None) != RESULT_KIND:
            raise ValueError(f"{where}: not a DFC result written by `python -m weftlib.gate dfc`")
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown or data.get("verdict") not in tuple(DfcVerdict):
            raise ValueError(f"{where}: unknown key(s) {unknown} or verdict {data.get('verdict')!r}")
        data["verdict"] = DfcVerdict(data["verdict"])
        try:
            data["errors"] = tuple(DfcError(**e) for e in data.get("errors", ()))
        except TypeError as exc:
            raise ValueError(f"{where}: malformed `errors` entry: {exc}") from exc
        if not all(isinstance(e.node, (str, type(None))) and isinstance(e.message, str) for e in data["errors"]):
            raise ValueError(f"{where}: an `errors` entry has a node or message that is not text")
        ends = data.get("end_nodes", ())
        if not isinstance(ends, (list, tuple)) or not all(isinstance(n, str) for n in ends):
            raise ValueError(f"{where}: `end_nodes` must be a list of node names, got {ends!r}")
        data["end_nodes"] = tuple(ends)
        for key in ("har", "model", "exception", "last_frame", "later_failure", "arch", "dfc_version", "source"):
            if data.get(key) is not None and not isinstance(data[key], str):
                raise ValueError(f"{where}: `{key}` must be text or null, got {data[key]!r}")
        digest = data.get("sha256")
        if digest is not None and not (isinstance(digest, str) and _SHA256.fullmatch(digest)):
            raise ValueError(f"{where}: `sha256` must be 64 lower-case hex digits or null, got {digest!r:.80}")
        if not isinstance(data.get("reason", ""), str):
            raise ValueError(f"{where}: `reason` must be text")
        return cls(**data)


@dataclass
class _Scan:
    """What a pass over the lines found, with the line index of each event."""

    errors: list[tuple[int, DfcError]] = field(default_factory=list)
    failure_at: int | None = None
    completed_at: int | None = None
    model: str | None = None
    har: str | None = None
    end_nodes: dict[str, None] = field(default_factory=dict)  # in order, each once (a dict: no scan per name)
    exception: str | None = None
    last_frame: str | None = None
    later_failure: str | None = None
    started: bool = False
    parser_frames: bool = False
    retried: bool = False
    stray_exception: str | None = None


def read_dfc_log(text: str | bytes) -> DfcResult:
    """Classify DFC output: `parsed`, `rejected` (with errors, nodes, ops, end nodes) or `unrecognised`."""
    if not isinstance(text, (str, bytes, bytearray)):
        raise TypeError(f"text: expected str or bytes, got {type(text).__name__}")
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").translate(_CONTROL).split("\n")
    scan = _Scan()
    for index, raw in enumerate(lines):
        _scan_line(scan, index, _PREFIX.sub("", raw, count=1).rstrip(), lines)
    return _verdict(scan)


def load_dfc_result(path: str | Path) -> DfcResult:
    """A DFC result from a file: JSON written by the `dfc` CLI, or a raw log (any other file)."""
    path = Path(path)
    data = path.read_bytes()
    if path.suffix.lower() == ".json":
        result = DfcResult.from_json(data.decode("utf-8", errors="replace"), str(path))
    else:
        result = read_dfc_log(data)
    return replace(result, source=str(path))


def _scan_line(scan: _Scan, index: int, line: str, lines: list[str]) -> None:
    if not line:
        return
    if "Translation started on ONNX model" in line:
        scan.started = True
        if (m := _STARTED.search(line)) and scan.model is None:
            scan.model = m.group(1).rstrip(".")
    if (m := _COMPLETED.search(line)) and scan.completed_at is None:
        scan.completed_at, scan.model = index, scan.model or m.group(1).rstrip(".")
    if (m := _HAR.search(line)) and scan.har is None:
        scan.har = m.group(1).strip().rstrip(".")
        scan.completed_at = index if scan.completed_at is None else scan.completed_at
    if (m := _FRAME.search(line)) and "hailo_sdk_client" in m.group(1):
        path = m.group(1)
        scan.last_frame = f"{path[path.index('hailo_sdk_client') :]}:{m.group(2)} in {m.group(3)}"
        if scan.completed_at is None:
            scan.parser_frames = True
            _fail(scan, index)
    if "Parsing failed" in line:
        _fail(scan, index)
    if "retrying parsing with end node names" in line:
        scan.retried = True
    _scan_recommendations(scan, index, line)
    found = _scan_errors(scan, index, line, lines)
    if not found:
        _scan_exception(scan, index, line, lines)


def _fail(scan: _Scan, index: int) -> None:
    if scan.failure_at is None:
        scan.failure_at = index


def _scan_recommendations(scan: _Scan, index: int, line: str) -> None:
    if m := _CLI_RECOMMEND.search(line):
        names = [a or b for a, b in _QUOTED.findall(m.group(1))]
    elif m := _PLEASE.search(line):
        names = [n.strip().strip("'\"[]") for n in m.group(1).rstrip().rstrip(".").split(",")]
    else:
        return
    _fail(scan, index)
    scan.end_nodes.update((n, None) for n in names if n)


def _scan_errors(scan: _Scan, index: int, line: str, lines: list[str]) -> bool:
    """`<Class> in op <node>: <message>` entries, several per line when the list was flattened."""
    matches = [m for m in _ERROR.finditer(line) if m.group(1).endswith(("Error", "Exception"))]
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        message = _clean(line[m.end() : end].split("Please try to parse the model again", maxsplit=1)[0])
        if not message:
            message = _continuation(lines, index)
        scan.errors.append((index, DfcError(m.group(1), m.group(2).strip(), _op_named(message), message)))
        _fail(scan, index)
    return bool(matches)


def _scan_exception(scan: _Scan, index: int, line: str, lines: list[str]) -> None:
    """A Python exception line `pkg.mod.SomeError: message` (checked without regex backtracking)."""
    head, sep, message = line.strip().partition(":")
    parts = head.split(".")
    if not sep or not all(p.isidentifier() for p in parts) or not parts[-1].endswith(("Error", "Exception")):
        return
    cls, message = parts[-1], _clean(message)
    if scan.completed_at is not None:
        scan.later_failure = scan.later_failure or f"{cls}: {message}"
        return
    hailo = head.startswith("hailo_sdk") or cls.startswith(("Unsupported", "Unexpected", "Parsing"))
    if cls == "ParsingWithRecommendationException" or (hailo and "errors found in the graph" in message):
        scan.exception = f"{cls}: {message}"
        _fail(scan, index)
        return
    if hailo or scan.parser_frames or scan.started:
        node = _translated_from(line, lines, index)
        scan.errors.append((index, DfcError(cls, node, _op_named(message), message)))
        scan.exception = f"{cls}: {message}"
        _fail(scan, index)
    else:
        scan.stray_exception = f"{cls}: {message}"


def _translated_from(line: str, lines: list[str], index: int) -> str | None:
    following = lines[index + 1] if index + 1 < len(lines) else ""
    m = _TRANSLATED_FROM.search(line) or _TRANSLATED_FROM.search(following[:2000])
    return m.group(1) if m else None


def _continuation(lines: list[str], index: int) -> str:
    """The message of an error line wrapped right after its colon: the next non-blank line, if plain text."""
    for raw in lines[index + 1 : index + 3]:
        line = _PREFIX.sub("", raw, count=1).strip()
        if line:
            plain = not (_ERROR.search(line) or _FRAME.search(line) or line.startswith(("[", "---", "===")))
            return _clean(line) if plain else ""
    return ""


def _clean(message: str) -> str:
    """Strip whitespace, literal `\\n` (a repr'd message) and the quote/comma left by a flattened list."""
    message = message.strip()
    end = len(message)
    while message.endswith("\\n", 0, end):  # by index: one copy however many there are
        end -= 2
        while end and message[end - 1].isspace():
            end -= 1
    message = message[:end]
    for quote in ("'", '"'):
        if message.count(quote) % 2:  # an unbalanced quote closes a list item, not the message
            message = message.rstrip(",] ").rstrip(quote).rstrip()
    return message


@lru_cache(maxsize=1)
def _onnx_op_names() -> dict[str, str]:
    try:
        import onnx.defs
    except ImportError:  # the reader also runs where onnx is missing; names then stay as written
        return {}
    # onnx's own name for the default domain: this file runs in the DFC image without the rest of weftlib
    return {s.name.lower(): s.name for s in onnx.defs.get_all_schemas() if s.domain == onnx.defs.ONNX_DOMAIN}


def _op_named(message: str) -> str | None:
    """The op type when the message names one; DFC-style upper case (RESHAPE) is mapped to ONNX casing."""
    for pattern in _OP_NAMED:
        if m := pattern.search(message[-2000:] if pattern is _OP_NAMED[2] else message):
            word = m.group(1)
            if pattern is _OP_NAMED[2] and word.lower() not in _onnx_op_names() and not word[0].isupper():
                continue
            return _onnx_op_names().get(word.lower(), word)
    return None


def _verdict(scan: _Scan) -> DfcResult:
    common = DfcResult(  # what every result below shares; each sets its verdict
        DfcVerdict.UNRECOGNISED,
        model=scan.model,
        har=scan.har,
        last_frame=scan.last_frame,
        end_nodes=tuple(scan.end_nodes),
    )
    before = scan.completed_at if scan.completed_at is not None else float("inf")
    if scan.failure_at is not None and scan.failure_at < before:
        errors = tuple(dict.fromkeys(e for i, e in scan.errors if i < before))
        reason = _rejection_reason(scan, errors)
        return replace(common, verdict=DfcVerdict.REJECTED, errors=errors, exception=scan.exception, reason=reason)
    if scan.completed_at is not None:
        reason = "translation completed" + ("" if scan.har else " (no HAR path in this text)")
        return replace(common, verdict=DfcVerdict.PARSED, later_failure=scan.later_failure, reason=reason)
    if scan.stray_exception:
        return replace(
            common,
            exception=scan.stray_exception,
            reason=f"{scan.stray_exception[:200]} with no sign of the DFC parser",
        )
    reason = "translation started but no result (truncated?)" if scan.started else "no DFC verdict found"
    return replace(common, reason=reason)


def _rejection_reason(scan: _Scan, errors: tuple[DfcError, ...]) -> str:
    if errors:
        text = f"{len(errors)} error(s) from the parser"
    elif scan.end_nodes:
        text = "parser recommended cutting at end nodes"
    elif scan.exception:
        text = scan.exception[:200]
    else:
        text = f"traceback through the parser ({scan.last_frame}); exception line cut off"
    if scan.completed_at is not None:
        text += "; a later translation completed only after that failure" + (
            " (retry with recommended end nodes)" if scan.retried else ""
        )
    return text


# What the DFC prints when it stops before reading any operator (RFD 1154 details: `_add_input_layers:
# output_format is None`; weftspun/rf-detr-cpp scripts/gen_op_tests.py: "Inputs found: 0").
BEFORE_OPERATORS = ("_add_input_layers", "output_format is None", "Inputs found: 0")
# Harness artefacts that read like a refusal but are about the request (gen_op_tests.py: unnamed end nodes).
INCONCLUSIVE = ("end_node_names is missing in the HN", "MisspellNodeError")


def failure_cause(result: DfcResult, node_ops: dict[str, str] | None = None) -> FailureCause | None:
    """Why a rejected parse failed: "operator" (an error names a node or op), "before operators" (the parser
    stopped at the input layers, so no op was judged) or "inconclusive" (a harness artefact, or an error
    naming nothing). None for a result that is not a rejection.

    `node_ops` (node name -> op, from the graph) lets an error naming a node count as an operator rejection.
    """
    if result.verdict != DfcVerdict.REJECTED:
        return None
    texts = [
        result.exception or "",
        result.reason,
        result.last_frame or "",
        *(f"{e.cls}: {e.message}" for e in result.errors),
    ]
    if any(marker in text for text in texts for marker in BEFORE_OPERATORS):
        return FailureCause.BEFORE_OPERATORS
    if any(marker in text for text in texts for marker in INCONCLUSIVE):
        return FailureCause.INCONCLUSIVE

    def names_something(e: DfcError) -> bool:
        if e.op:
            return True
        if not e.node:
            return False
        return node_ops is None or any(n in node_ops for n in (e.node, e.node.lstrip("/"), "/" + e.node))

    return FailureCause.OPERATOR if any(names_something(e) for e in result.errors) else FailureCause.INCONCLUSIVE
