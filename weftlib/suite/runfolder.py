"""A run folder's state file: what state the run is in, written atomically and read back honestly.

`state.json` (running / interrupted / failed / passed) is written before the first notebook starts and on
every way out. Only SIGKILL cannot be caught: the file then still says "running", with the runner's pid,
and `read_state` reports such a run as interrupted once that process is gone.
"""

from __future__ import annotations

import json
import os
import socket
from datetime import datetime, UTC
from pathlib import Path
from typing import Any

from .files import write_atomic

STATE_FILE = "state.json"
STATES = ("running", "interrupted", "failed", "passed")


def write_state(run_dir: Path, state: str, **detail: Any) -> dict[str, Any]:
    """Write `state.json` atomically: the run's state, this runner's pid and host, and what it was doing."""
    if state not in STATES:
        raise ValueError(f"state must be one of {STATES}, got {state!r}")
    payload = {
        "state": state,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "updated": datetime.now(UTC).isoformat(timespec="seconds"),
        **detail,
    }
    write_atomic(run_dir / STATE_FILE, json.dumps(payload, indent=2, default=str))
    return payload


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_state(run_dir: str | os.PathLike) -> dict[str, Any]:
    """A run folder's state; "running" whose runner (same host) is gone is reported as "interrupted"."""
    path = Path(run_dir) / STATE_FILE
    if not path.is_file():
        return {"state": "unknown", "reason": f"no {STATE_FILE} in {run_dir}: not a run folder of this suite"}
    try:
        state = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return {"state": "unknown", "reason": f"{path} is unreadable or not JSON ({exc}): not a state this suite wrote"}
    if not isinstance(state, dict) or not isinstance(state.get("state"), str):
        return {"state": "unknown", "reason": f"{path} holds no run state this suite wrote"}
    pid = state.get("pid")
    if (
        state["state"] == "running"
        and state.get("host") == socket.gethostname()
        and isinstance(pid, int)
        and not _alive(pid)
    ):
        state = {
            **state,
            "state": "interrupted",
            "reason": f"the runner (pid {pid}) is gone: killed without a chance to say so",
        }
    return state
