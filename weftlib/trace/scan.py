"""What a reader of the host's source finds about a dependency: mentions, imports, hub loads, requirements.

A static view only: a dependency reached through `torch.hub` has no `import` in the host, which is why
`weftlib.trace.calls` watches the code run as well.
"""

from __future__ import annotations

import ast
import os
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "node_modules", ".tox", "build", "dist", ".ipynb_checkpoints"}
MAX_FILE_BYTES = 2_000_000
REQUIREMENT_FILE = re.compile(r"(requirements|constraints)[^/]*\.(txt|in)$", re.IGNORECASE)
MANIFEST_NAMES = {"pyproject.toml", "setup.cfg", "setup.py", "environment.yml", "environment.yaml", "Pipfile"}
INSTALL_COMMAND = re.compile(r"\b(pip3?|uv pip|conda|mamba|poetry|uv) (install|add)\b")


# ----------------------------------------------------------------------------------------------- static scan


@dataclass(frozen=True)
class ScanHit:
    """One line a reader would find: kind is import, hub_load, hub_dependency, requirement, install or mention."""

    kind: str
    path: str
    line: int
    text: str
    detail: str = ""


def normalize(name: str) -> str:
    """PEP 503 form, so `Foo_Bar` in a requirement matches the distribution `foo-bar`."""
    return canonicalize_name(name)


def requirement_name(line: str) -> str | None:
    """The distribution a requirement line names (None for comments, options, URLs, anything else).

    The line is read as a PEP 508 requirement (`packaging`), once it is stripped of what a manifest wraps
    around one: a comment, the quotes and comma of a list item (setup.py, pyproject.toml). A Pipfile's
    `name = "spec"` names its key.
    """
    stripped = line.split("#", 1)[0].strip().rstrip(",").strip()
    if stripped[:1] in ("'", '"'):  # a quoted list item: drop its quotes, not those of a marker inside it
        stripped = stripped[1:-1] if stripped.endswith(stripped[0]) else stripped[1:]
    if not stripped or stripped.startswith(("-", "[")):  # options (-e, -r, --hash) and table headers
        return None
    key, equals, _ = stripped.partition("=")
    for candidate in (stripped, key.strip() if equals else None):
        try:
            return canonicalize_name(Requirement(candidate).name) if candidate else None
        except InvalidRequirement:
            continue
    return None


def _text_files(root: Path) -> Iterable[tuple[Path, str]]:
    """Every readable text file under root, skipping VCS/env/cache folders, binaries and huge files."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info"))
        for name in sorted(files):
            path = Path(folder) / name
            try:
                if path.stat().st_size > MAX_FILE_BYTES:
                    continue
                raw = path.read_bytes()
            except OSError:
                continue
            if b"\0" in raw[:8192]:
                continue
            yield path, raw.decode("utf-8", errors="replace")


def _dotted(node: ast.AST) -> str:
    """`torch.hub.load` for an attribute chain, '' for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _argument(call: ast.Call, position: int, keyword: str) -> str:
    """Source text of a call argument given by position or keyword ('' when absent)."""
    if len(call.args) > position:
        return ast.unparse(call.args[position])
    return next((ast.unparse(k.value) for k in call.keywords if k.arg == keyword), "")


def _python_hits(tree: ast.AST, rel: str, lines: list[str], name: str, hubconf: bool) -> list[ScanHit]:
    """Import statements of `name`, every torch.hub.load call, and a hubconf's declared dependencies."""
    hits = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Import) and any(a.name.split(".")[0] == name for a in node.names)) or (
            isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == name
        ):
            hits.append(ScanHit("import", rel, node.lineno, lines[node.lineno - 1].strip()))
        elif isinstance(node, ast.Call) and _dotted(node.func).endswith("hub.load"):
            detail = (
                f"repo={_argument(node, 0, 'repo_or_dir')}, entry={_argument(node, 1, 'model')}, "
                f"source={_argument(node, 99, 'source') or 'github'}"
            )
            hits.append(ScanHit("hub_load", rel, node.lineno, lines[node.lineno - 1].strip(), detail))
        elif hubconf and isinstance(node, ast.Assign) and any(_dotted(t) == "dependencies" for t in node.targets):
            try:
                declared = [normalize(d) for d in ast.literal_eval(node.value)]
            except (ValueError, TypeError, SyntaxError):
                continue
            if normalize(name) in declared:
                hits.append(ScanHit("hub_dependency", rel, node.lineno, lines[node.lineno - 1].strip()))
    return hits


def _line_kind(path: Path, line: str, name: str) -> str:
    """Classify a line that mentions `name` and is not an import statement."""
    manifest = REQUIREMENT_FILE.search(path.name) or path.name in MANIFEST_NAMES
    if manifest and requirement_name(line) == normalize(name):
        return "requirement"
    if INSTALL_COMMAND.search(line):
        return "install"
    return "mention"


def _check_scan_args(root: str | os.PathLike, name: str) -> Path:
    path = Path(root)
    if not path.is_dir():
        raise FileNotFoundError(f"root: {str(root)!r} is not a directory")
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*", name or ""):
        raise ValueError(f"name: {name!r} is not a package or distribution name")
    return path


def static_scan(root: str | os.PathLike, name: str) -> list[ScanHit]:
    """What reading the tree at `root` reveals about `name`, one hit per line, sorted by path and line.

    Python files are parsed (imports and `torch.hub.load` calls come from the AST, so a commented-out import
    is a mention, not an import); every other text file is read line by line. `hub_load` hits are listed
    whatever their target, since a hub load is how code can arrive without an import.
    """
    root_path = _check_scan_args(root, name)
    word = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", re.IGNORECASE)
    hits: list[ScanHit] = []
    for path, text in _text_files(root_path):
        rel = path.relative_to(root_path).as_posix()
        lines = text.splitlines()
        structured: list[ScanHit] = []
        if path.suffix == ".py":
            try:
                structured = _python_hits(ast.parse(text), rel, lines, name, path.name == "hubconf.py")
            except SyntaxError:
                structured = []
        taken = {h.line for h in structured if h.kind != "hub_load"}
        hits.extend(structured)
        hits.extend(
            ScanHit(_line_kind(path, line, name), rel, number, line.strip()[:200])
            for number, line in enumerate(lines, 1)
            if number not in taken and word.search(line)
        )
    return sorted(hits, key=lambda h: (h.path, h.line, h.kind))


def find_assignments(root: str | os.PathLike, variable: str) -> list[tuple[str, int, Any]]:
    """Module-level `variable = <literal>` in the Python files under root: (path, line, value)."""
    root_path = _check_scan_args(root, variable)
    found = []
    for path, text in _text_files(root_path):
        if path.suffix != ".py" or variable not in text:
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(_dotted(t) == variable for t in node.targets):
                try:
                    found.append((path.relative_to(root_path).as_posix(), node.lineno, ast.literal_eval(node.value)))
                except (ValueError, TypeError, SyntaxError):
                    continue
    return found


def declared_dependencies(root: str | os.PathLike) -> dict[str, list[str]]:
    """What installing the project at root installs: `[project].dependencies` of its pyproject.toml and the
    lines of its top-level requirements.txt, as {normalized name: ['file:line', ...]}."""
    root_path = Path(root)
    declared: dict[str, list[str]] = {}
    requirements = root_path / "requirements.txt"
    if requirements.is_file():
        for number, line in enumerate(requirements.read_text(errors="replace").splitlines(), 1):
            if (dep := requirement_name(line)) is not None:
                declared.setdefault(dep, []).append(f"requirements.txt:{number}")
    pyproject = root_path / "pyproject.toml"
    if pyproject.is_file():
        text = pyproject.read_text(errors="replace")
        for requirement in tomllib.loads(text).get("project", {}).get("dependencies", []):
            if (dep := requirement_name(requirement)) is not None:
                number = next((i for i, ln in enumerate(text.splitlines(), 1) if requirement in ln), 0)
                declared.setdefault(dep, []).append(f"pyproject.toml:{number}")
    return declared
