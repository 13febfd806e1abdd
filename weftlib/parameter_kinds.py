"""What a notebook parameter may hold, as the notebooks' models declare it (`notebook_model.Parameter`).

A value that passes cannot fail late, or pass vacuously, for a reason the plan could have shown: a tolerance is
finite and positive (an infinite one would make every equality assert pass), a thread count is between 1 and
MAX_THREADS, a size or count fits the 32 bits torch and ONNX index with, a choice is one of its allowed values, a
file or folder to read exists. Parameters that name a directory of code the notebook executes are `OutsideCode`,
so the run can say which outside code it ran, and each must be a checkout of the repository it names: its own
files are looked for (read, never run) before anything runs. `suite.schema` checks plans against these.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, Field

from .paths import REPO_ROOT

Tolerance = Annotated[float, Field(gt=0, allow_inf_nan=False)]  # finite and positive
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]  # a limit: memory, a ratio
INT32 = 2**31 - 1  # the largest size or count torch and ONNX index with
MAX_THREADS = 1024  # more threads than any machine the suite runs on has cores: a typo, never a plan
Count = Annotated[int, Field(ge=1, le=INT32)]  # sizes, repeats
Threads = Annotated[int, Field(ge=1, le=MAX_THREADS)]
Pair = Annotated[list[Count], Field(min_length=2, max_length=2)]


def _grid(value: list[int]) -> list[int]:
    if len(value) not in (0, 3):
        raise ValueError(f"expected [] or [low, ratio, channels], got {len(value)} items")
    return value


Grid = Annotated[list[Count], AfterValidator(_grid)]  # [] (the default geometry) or [low, ratio, channels]


def _directory(value: str) -> str:
    if value and not (REPO_ROOT / value).is_dir():  # the kernel runs in the checkout: relative paths start there
        raise ValueError(f"no directory {value!r} (a relative path is read from the repository root)")
    return value


Directory = Annotated[str, AfterValidator(_directory)]  # "" for the stand-in, else an existing directory


def _file(value: str) -> str:
    if value and not (REPO_ROOT / value).is_file():
        raise ValueError(f"no file {value!r} (a relative path is read from the repository root)")
    return value


File = Annotated[str, AfterValidator(_file)]  # "" for the default, else an existing file


def _defines(path: Path, name: str) -> bool:
    """Whether a Python file binds `name` at its top level (def, import or assignment), read without running."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError):
        return False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name) == name for a in node.names):
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
    return False


def _naf_checkout(root: Path) -> str | None:
    hubconf = root / "hubconf.py"
    if not hubconf.is_file():
        return "it has no hubconf.py"
    if not _defines(hubconf, "naf"):
        return "its hubconf.py defines no `naf` entry"
    return None


def _pixal3d_checkout(root: Path) -> str | None:
    model = root / "pixal3d" / "models" / "sparse_structure_flow.py"
    return None if model.is_file() else "it has no pixal3d/models/sparse_structure_flow.py"


@dataclass(frozen=True)
class OutsideCode:
    """A parameter naming a directory whose code the notebook executes (a checkout, a hub repository), of
    `repository`; `missing` says why a directory is not a checkout of it (None when it is)."""

    what: str
    repository: str
    missing: Callable[[Path], str | None]

    def check(self, value: str) -> str:
        if value:
            why = self.missing(resolve(value))
            if why:
                raise ValueError(f"{value!r} is not a checkout of {self.repository}: {why}")
        return value


NAF_HUB = OutsideCode("a NAF hub repository: its hubconf.py and model code are run", "valeoai/NAF", _naf_checkout)
PIXAL3D = OutsideCode("a Pixal3D checkout: its model code is imported and run", "Pixal3D", _pixal3d_checkout)


@dataclass(frozen=True)
class OneOf:
    """A value among choices a package defines (read only when a plan gives such a value: they may sit in
    modules that import torch)."""

    choices: Callable[[], tuple[str, ...]]
    many: bool = False  # a list of such values


def _notebooks() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in (REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))


NOTEBOOKS = OneOf(_notebooks, many=True)  # notebooks of the suite, e.g. those whose graphs a notebook reads


def resolve(value: str) -> Path:
    """Where a directory parameter points, as the kernel (whose working directory is the checkout) reads it."""
    return Path(os.path.normpath(REPO_ROOT / value))
