"""A run folder's records: its state file, its summary, and the typed results they are made of.

`state.json` (running / interrupted / failed / passed) is written before the first notebook starts and on
every way out. Only SIGKILL cannot be caught: the file then still says "running", with the runner's pid,
and `read_state` reports such a run as interrupted once that process is gone.

`summary.json` is a `RunSummary`, written by `write_summary` and read back by `read_summary` only: the index,
the RFD page and the next run's estimate of the time left all read the same typed record.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict, Unpack, get_args

from ..formatting import commit_text
from ..workers import pid_alive
from .files import write_atomic
from .record import jsonable

if TYPE_CHECKING:
    from pydantic import TypeAdapter

STATE_FILE = "state.json"
State = Literal["running", "interrupted", "failed", "passed"]
STATES: tuple[str, ...] = get_args(State)
SUMMARY_FILE = "summary.json"


class StateDetail(TypedDict, total=False):
    """What the runner adds to a state: when the run started, its plan, the notebook it was at, which failed,
    and on a way out why."""

    started: str  # UTC, ISO 8601 to the second
    params_file: str
    notebook: str | None
    failed: list[str]
    reason: str


class RunState(StateDetail):
    """What `state.json` says: the state, who wrote it and when, and the runner's detail. A state read back
    from a folder this suite did not write is "unknown", with a reason."""

    state: str  # a `State`, or "unknown"
    pid: NotRequired[int]
    host: NotRequired[str]
    updated: NotRequired[str]


class SummaryError(ValueError):
    """A summary.json that is missing, unreadable, or not one this suite wrote."""


@dataclass
class NotebookResult:
    """What happened to one notebook of a run."""

    name: str
    status: str = "not run"  # passed | failed | interrupted | not run
    seconds: float = 0.0
    error: dict[str, Any] | None = None
    headline: dict[str, Any] = field(default_factory=dict)
    parameters: dict[str, Any] = field(default_factory=dict)
    headline_text: list[dict[str, str]] = field(default_factory=list)
    long_steps: list[dict[str, Any]] = field(default_factory=list)
    cell_seconds: dict[str, dict[str, Any]] = field(default_factory=dict)

    def describe_error(self) -> str:
        """`notebook, cell In [N]: ErrorName: message` (N as papermill's banner numbers it), then the failing
        line; the line the runner prints for a failure."""
        if not self.error:
            return f"{self.name}: {self.status}"
        err = self.error
        if err.get("exec_count") is not None:
            where = f"cell In [{err['exec_count']}]"
        elif err.get("cell") is not None:
            where = f"cell {err['cell']} (counting every cell from 0; it never got an In [N] number)"
        else:
            where = "before any cell"
        line = f"\n  failing line: {err['line']}" if err.get("line") else ""
        return f"{self.name}, {where}: {err.get('ename')}: {err.get('evalue')}{line}"


@dataclass
class RunResult:
    """The whole run: where it is, what each notebook did, and whether the appendix was replaced."""

    run_dir: Path
    notebooks: list[NotebookResult]
    published: Path | None = None
    state: str = "running"

    @property
    def passed(self) -> bool:
        return all(nb.status == "passed" for nb in self.notebooks)


@dataclass
class RunSummary:
    """What `summary.json` says of a run, key for key and in the file's order. Every key has a default, so a
    run folder written before a key existed still reads."""

    bottom_line: str = ""  # the one sentence the pages open with (bottom_line.bottom_line)
    answers: list[dict[str, Any]] = field(default_factory=list)  # one row per RFD question (answers.answer_rows)
    scope: str = ""
    verdicts: list[dict[str, Any]] = field(default_factory=list)  # one row per RFD graph (verdicts.verdict_rows)
    appendix: bool = False
    state: str = "unknown"
    passed: bool = False
    partial: bool = False
    params_file: str = ""
    params_set: list[str] = field(default_factory=list)  # the command line's --set KEY=VALUE, applied to the plan
    params_hash: str = ""
    description: str = ""
    started: str = ""  # UTC, ISO 8601 to the second
    finished: str = ""
    durations: dict[str, dict[str, Any]] = field(default_factory=dict)  # per notebook: seconds and long steps
    disk_bytes: int = 0  # what the run folder keeps (`room.kept_bytes`): the room the next run of the plan needs
    timings: dict[str, dict[str, Any]] = field(default_factory=dict)  # per notebook: record.timing_quality
    provenance: dict[str, Any] = field(default_factory=dict)  # provenance.environment() and the outside code
    notebooks: list[NotebookResult] = field(default_factory=list)

    @property
    def commit(self) -> str | None:
        """The suite's git commit when it ran; None outside a git checkout."""
        commit = (self.provenance.get("git") or {}).get("commit")
        return commit if isinstance(commit, str) and commit else None

    @property
    def dirty(self) -> bool:
        """Whether the suite's checkout had uncommitted changes to tracked files."""
        return bool((self.provenance.get("git") or {}).get("dirty"))

    @property
    def commit_text(self) -> str:
        """The suite's commit as pages print it (`formatting.commit_text`: 12 digits, "(dirty tree)" if so)."""
        return commit_text(self.commit, self.dirty)

    def to_json(self) -> dict[str, Any]:
        """The plain JSON value `summary.json` holds."""
        return dict(jsonable(dataclasses.asdict(self)))


@functools.cache
def _summary_reader() -> TypeAdapter[RunSummary]:
    from pydantic import TypeAdapter  # late: `status` and `--help` start without it

    return TypeAdapter(RunSummary)


def write_summary(run_dir: Path, summary: RunSummary) -> Path:
    """Write `summary.json` into the run folder atomically; return its path."""
    path = Path(run_dir) / SUMMARY_FILE
    write_atomic(path, json.dumps(summary.to_json(), indent=2))
    return path


def read_summary(where: str | os.PathLike) -> RunSummary:
    """The summary of a run folder (or of a summary.json named directly); SummaryError, one line naming the
    file and the first wrong key, for a missing, unreadable or foreign file."""
    from pydantic import ValidationError

    path = Path(where)
    path = path / SUMMARY_FILE if path.is_dir() else path
    if not path.is_file():
        raise SummaryError(f"{path.parent}: no {SUMMARY_FILE}")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise SummaryError(f"{path}: unreadable or not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise SummaryError(f"{path}: not a summary this suite wrote (not a JSON object)")
    try:
        return _summary_reader().validate_python(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where_in = ".".join(str(part) for part in first["loc"]) or "top level"
        raise SummaryError(f"{path}: not a summary this suite wrote ({where_in}: {first['msg']})") from None


def newest_run(digest: str, folders: Sequence[Path]) -> tuple[Path, RunSummary] | None:
    """The newest finished run of the plan whose `SuitePlan.digest` is `digest`, searched in `folders` (each a
    run folder or a folder of run folders), with its summary; None if there is none."""
    candidates = []
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in [folder / SUMMARY_FILE, *sorted(folder.glob(f"*/{SUMMARY_FILE}"))]:
            try:
                summary = read_summary(path)
            except (OSError, SummaryError):
                continue
            if summary.params_hash == digest and summary.finished:
                candidates.append((summary.finished, path.parent, summary))
    if not candidates:
        return None
    _, where, summary = max(candidates, key=lambda c: c[0])
    return where, summary


def write_state(run_dir: Path, state: str, **detail: Unpack[StateDetail]) -> RunState:
    """Write `state.json` atomically: the run's state, this runner's pid and host, and what it was doing."""
    if state not in STATES:
        raise ValueError(f"state must be one of {STATES}, got {state!r}")
    payload: RunState = {
        "state": state,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "updated": datetime.now(UTC).isoformat(timespec="seconds"),
        **detail,
    }
    write_atomic(run_dir / STATE_FILE, json.dumps(payload, indent=2, default=str))
    return payload


def read_state(run_dir: str | os.PathLike) -> RunState:
    """A run folder's state; "running" whose runner (same host) is gone is reported as "interrupted"."""
    path = Path(run_dir) / STATE_FILE
    if not path.is_file():
        return {"state": "unknown", "reason": f"no {STATE_FILE} in {run_dir}: not a run folder of this suite"}
    try:
        state: RunState = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        return {"state": "unknown", "reason": f"{path} is unreadable or not JSON ({exc}): not a state this suite wrote"}
    if not isinstance(state, dict) or not isinstance(state.get("state"), str):
        return {"state": "unknown", "reason": f"{path} holds no run state this suite wrote"}
    pid = state.get("pid")
    if (
        state["state"] == "running"
        and state.get("host") == socket.gethostname()
        and isinstance(pid, int)
        and not pid_alive(pid)
    ):
        state = {
            **state,
            "state": "interrupted",
            "reason": f"the runner (pid {pid}) is gone: killed without a chance to say so",
        }
    return state
