"""Provenance: which versions, which machine, which commit and which outside code a run used.

Notebook 00 shows it; the run index records it next to every timing, so each figure carries its machine.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import platform
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..formatting import NO_COMMIT, commit_text, error_sentence
from ..paths import REPO_ROOT
from . import schema

if TYPE_CHECKING:
    from .params import SuitePlan

TRACKED_PACKAGES = ("torch", "natten", "onnx", "onnxruntime", "onnxscript", "papermill", "nbconvert")


def package_versions(names: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str | None]:
    """Installed distribution versions (None for a package that is not installed)."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_state(root: Path = REPO_ROOT) -> dict[str, Any]:
    """Commit and dirtiness of the checkout the suite runs from (None outside a git checkout)."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], check=False, cwd=root, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def outside_code(plan: SuitePlan, ran: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The code from outside this repository that the plan has its notebooks execute (a `hub_dir` whose
    hubconf.py is run, a `host_root` whose model code is imported): per parameter given, the notebook, the
    directory, what runs from it, and its git commit and dirtiness where it is a git checkout. `ran`, if
    given, keeps the notebooks that did run."""
    found = []
    for nb in plan.notebooks:
        if ran is not None and nb.name not in ran:
            continue
        for key, what in schema.outside_code(nb.name).items():
            value = nb.parameters.get(key)
            if isinstance(value, str) and value:
                path = schema.resolve(value)
                found.append(
                    {"notebook": nb.name, "parameter": key, "path": str(path), "runs": what, **git_state(path)}
                )
    return found


def short_commit(state: dict[str, Any]) -> str | None:
    """A `git_state` as people quote it: the commit's first 12 digits, "(dirty tree)" if so; None outside git."""
    return commit_text(state["commit"], state.get("dirty")) if state.get("commit") else None


def describe_code(code: dict[str, Any]) -> str:
    """One line for a piece of outside code: where it is and which commit (or that it is no git checkout)."""
    commit = short_commit(code)
    where = f"git {commit}" if commit else NO_COMMIT
    return f"{code['notebook']} {code['parameter']} = {code['path']} ({where}): {code['runs']}"


def sources(notebook: str, **directories: str) -> str:
    """What a notebook's answer rests on, for its `rests_on["sources"]`: per outside-code parameter given
    (`hub_dir=...`, `host_root=...`), the repository's checkout with its commit, or its stand-in when empty.
    A part starting "stand-in" makes the answer's status "answered on a stand-in" (`record.answer_status`)."""
    parts = []
    for key, value in directories.items():
        name = schema.repository(notebook, key)
        if not value:
            parts.append(f"stand-in for {name}")
            continue
        path = schema.resolve(value)
        commit = short_commit(git_state(path))
        parts.append(f"{name} checkout {f'at {commit}' if commit else f'({NO_COMMIT})'}, {path}")
    if not parts:
        raise ValueError(f"sources: name at least one outside-code parameter of {notebook}")
    return "; ".join(parts)


def natten_backends() -> dict[str, Any]:
    """Whether natten imports, and whether it carries libnatten (its CUDA kernels) or only the Flex path."""
    info: dict[str, Any] = {"installed": False, "libnatten": False, "cuda": False, "note": ""}
    try:
        natten = importlib.import_module("natten")
    except Exception as exc:  # a broken build is evidence too
        info["note"] = f"natten does not import: {exc!r}"
        return info
    import torch

    info["installed"] = True
    info["version"] = getattr(natten, "__version__", None)
    info["libnatten"] = bool(getattr(natten, "HAS_LIBNATTEN", False))
    info["cuda"] = torch.cuda.is_available()
    info["note"] = (
        "CUTLASS kernels available"
        if info["libnatten"] and info["cuda"]
        else "no libnatten/CUDA: only the Flex backend (dense attention with a mask) can run here"
    )
    return info


def hailo_dfc() -> dict[str, Any]:
    """Whether the Hailo Dataflow Compiler's Python client imports here (Linux x86-64 in its image only):
    the gate's own check (`dfc_runner.dfc_client`), so provenance and the gate cannot disagree."""
    from ..gate.compiler.dfc_runner import dfc_client  # not at import: the gate package loads onnx
    from ..gate.compiler.dfc_target import image

    client, why = dfc_client()
    if client is None:
        said = error_sentence(why).rstrip(".")
        return {"importable": False, "reason": f"not importable here ({said}): the DFC runs in the {image()} image"}
    return {"importable": True, "version": getattr(client, "__version__", None)}


def machine() -> dict[str, Any]:
    """CPU, memory and accelerator of this machine, as evidence for every timing in the appendix."""
    import psutil
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "ram_bytes": psutil.virtual_memory().total,
        "python": platform.python_version(),
        "gpu": gpu,
    }


def environment() -> dict[str, Any]:
    """Everything notebook 00 reports and the run index records as provenance."""
    return {
        "versions": package_versions(),
        "machine": machine(),
        "natten": natten_backends(),
        "hailo_dfc": hailo_dfc(),
        "git": git_state(),
    }


def pinned_versions(pyproject: Path = REPO_ROOT / "pyproject.toml") -> dict[str, str]:
    """The `==` pins of pyproject.toml, so a notebook can show that it ran on what the project declares."""
    import tomllib

    from packaging.requirements import Requirement

    deps = [Requirement(d) for d in tomllib.loads(pyproject.read_text())["project"]["dependencies"]]
    return {r.name: s.version for r in deps for s in r.specifier if s.operator == "=="}


def version_rows(env: dict[str, Any], pins: dict[str, str]) -> list[dict[str, str | None]]:
    """Notebook 00's versions table: each tracked package, what is installed, what pyproject.toml pins."""
    return [{"package": k, "installed": v, "pinned": pins.get(k, "")} for k, v in env["versions"].items()]


def mismatched_versions(env: dict[str, Any], pins: dict[str, str]) -> list[str]:
    """The pinned packages installed at another version than the pin (a package not installed is not one)."""
    installed = env["versions"]
    return [p for p, want in pins.items() if installed.get(p) and not installed[p].startswith(want)]


def machine_text(m: dict[str, Any]) -> str:
    """A `machine()` record in one line: CPUs, memory and accelerator, as the index and notebook 00 print it."""
    return f"{m['cpu_count']} CPUs, {m['ram_bytes'] / 2**30:.1f} GiB RAM, GPU: {m['gpu'] or 'none'}"


def natten_backend_text(info: dict[str, Any]) -> str:
    """Which of natten's backends this machine has, as the overview's headline names it."""
    return "libnatten (CUTLASS)" if info["libnatten"] else "Flex only (no libnatten)"


def commit_line(state: dict[str, Any]) -> str:
    """The suite's full commit and whether its tree was clean, or that it ran outside a git checkout."""
    if not state.get("commit"):
        return NO_COMMIT
    return f"commit {state['commit']} ({'dirty tree' if state.get('dirty') else 'clean tree'})"
