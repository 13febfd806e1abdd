"""What each notebook's parameters may hold: the type of its `parameters` cell's default, narrowed by a table.

A value that passes here cannot fail late, or pass vacuously, for a reason the plan could have shown: a
tolerance is finite and positive (an infinite one would make every equality assert pass), a thread count is
between 1 and MAX_THREADS, a size or count fits the 32 bits torch and ONNX index with, a choice is one of its
allowed values (a notebook a graph comes from among the notebooks, an arch among those DFC 5.x targets), a
file or folder to read exists, and list items have the type the default's items have.
Values are checked strictly (pydantic, strict mode): no string stands for a number, no bool for an int; an
int may stand for a float. Parameters that name a directory of code the notebook executes (`hub_dir`,
`host_root`) are marked, so the run can say which outside code it ran, and each must be a checkout of the
repository it names: its own files are looked for (read, never run) before anything runs.

The allowed choices are read from the packages that define them, only when a plan gives such a value.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, TypeAdapter, ValidationError

from ..paths import REPO_ROOT

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
    """A value among choices a package defines (read only when needed: the packages import torch)."""

    choices: Callable[[], tuple[str, ...]]
    many: bool = False  # a list of such values


def _attention_methods() -> tuple[str, ...]:
    from ..attention.neighborhood import METHODS

    return tuple(METHODS)


def _naf_references() -> tuple[str, ...]:
    return ("natten", *_attention_methods())


def _shapes() -> tuple[str, ...]:
    from ..sparse.voxels import SHAPES

    return tuple(SHAPES)


def _notebooks() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in (REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))


def _archs() -> tuple[str, ...]:
    from ..gate.compiler.dfc_runner import DFC5_ARCHS

    return ("", *DFC5_ARCHS)  # "": the target arch of params/device_ops.yaml


def _dtypes() -> tuple[str, ...]:
    from ..sparse.footprint import DTYPES

    return tuple(DTYPES)


CONSTRAINTS: dict[str, dict[str, Any]] = {
    "00_overview": {"appendix_ram_gib": Positive},
    "01_trace_natten": {
        "host_root": PIXAL3D,
        "hub_dir": NAF_HUB,
        "hub_kwargs": dict[str, Any],
        "embed_dim": Count,
        "batch": Count,
        "channels": Count,
        "image_size": Count,
        "feature_grid": Annotated[int, Field(ge=9)],  # the 9x9 neighbourhood must fit
        "output_size": Count,
        "timing_repeats": Count,
    },
    "02_export_attention": {
        "hub_dir": NAF_HUB,
        "hub_kwargs": dict[str, Any],
        "threads": Threads,
        **dict.fromkeys(("eq_size", "eq_low"), Pair),
        **dict.fromkeys(
            (
                "eq_kernel",
                "eq_dilation",
                "eq_low_kernel",
                "heads",
                "dim",
                "v_dim",
                "bench_kernel",
                "bench_dim",
                "bench_repeats",
                "naf_channels",
                "naf_qk_dim",
                "naf_heads",
                "naf_kernel",
                "naf_low",
                "naf_ratio",
                "naf_rope_heads",
                "naf_eq_low",
                "naf_eq_ratio",
            ),
            Count,
        ),
        "equality_atol": Tolerance,
        "export_atol": Tolerance,
        "bench_sizes": list[Count],
        "bench_naf": list[Pair],  # [size, low] per NAF geometry
        "naf_rewrite_grid": Grid,
        "bench_naf_methods": OneOf(_attention_methods, many=True),
        "naf_memory_gib": Positive,
        "natten_max_gib": Positive,
        "naf_method": OneOf(_attention_methods),
        "naf_reference": OneOf(_naf_references),
    },
    "03_sparse_conv_memory": {
        "shapes": OneOf(_shapes, many=True),
        "sparse_only_shapes": OneOf(_shapes, many=True),
        **dict.fromkeys(("measure_shape", "headline_shape", "bench_shape"), OneOf(_shapes)),
        **dict.fromkeys(("measure_dtype", "headline_dtype"), OneOf(_dtypes)),
        **dict.fromkeys(("count_resolutions", "measure_resolutions", "sparse_only_resolutions"), list[Count]),
        **dict.fromkeys(
            (
                "equality_res",
                "equality_channels",
                "dense_max_res",
                "measure_channels",
                "chunk_rows",
                "headline_res",
                "headline_channels",
                "time_res",
                "time_repeats",
                "bench_res",
                "bench_repeats",
                "export_res",
                "export_channels",
            ),
            Count,
        ),
        "measure_threads": Threads,
        "ratio_limit": Positive,
        "device_memory_gib": Positive,
    },
    "04_export_dit_block": {
        "host_root": PIXAL3D,
        "blocks": Count,
        "channels": Count,
        "global_tokens": Count,
        "seed": Annotated[int, Field(ge=0)],
        "opset": Count,
        "atol": Tolerance,
        "exact_tol": Tolerance,
    },
    "05_gate_pairing": {
        "dfc_results_dir": Directory,
        "probe_results_dir": Directory,
        "device_ops_file": File,
        "arch": OneOf(_archs),
        "graph_notebooks": OneOf(_notebooks, many=True),
    },
    "06_device_cut": {
        "tolerance": Annotated[float, Field(ge=0, allow_inf_nan=False)],  # 0: bit-identical
        "dfc_results_dir": Directory,
        "arch": OneOf(_archs),
        "graph_notebooks": OneOf(_notebooks, many=True),
    },
}


def outside_code(notebook: str) -> dict[str, str]:
    """{parameter: what it names} for the parameters of `notebook` that point at code the notebook runs."""
    return {k: v.what for k, v in CONSTRAINTS.get(notebook, {}).items() if isinstance(v, OutsideCode)}


def repository(notebook: str, key: str) -> str:
    """The repository an outside-code parameter names a checkout of ("valeoai/NAF", "Pixal3D")."""
    entry = CONSTRAINTS.get(notebook, {}).get(key)
    if not isinstance(entry, OutsideCode):
        raise KeyError(f"{notebook}.{key} names no outside code")
    return entry.repository


def _inferred(default: Any) -> Any:
    """The type a value must have to stand in for `default` (None: anything)."""
    if default is None:
        return Any
    if isinstance(default, (list, tuple)):
        kinds = {type(item) for item in default}
        if len(kinds) == 1 and not isinstance(default[0], (list, tuple, dict)) and default[0] is not None:
            return list[_inferred(default[0])]  # type: ignore[misc]  # built at run time for pydantic
        return list[Any]
    if isinstance(default, dict):
        return dict[str, Any]
    return type(default)


def _declared(entry: Any) -> Any:
    if isinstance(entry, OutsideCode):
        return Annotated[Directory, AfterValidator(entry.check)]  # a directory, then a checkout of its repository
    if isinstance(entry, OneOf):
        choice = Literal[entry.choices()]  # type: ignore[valid-type]
        return list[choice] if entry.many else choice  # type: ignore[valid-type]
    return entry


def _adapter(kind: Any) -> TypeAdapter:
    return TypeAdapter(kind, config=ConfigDict(strict=True))


def problem(notebook: str, key: str, value: Any, default: Any) -> tuple[str, str] | None:
    """(where inside the value, e.g. "[1]", and why) when `value` may not be given for `key`; None if it may."""
    entry = CONSTRAINTS.get(notebook, {}).get(key)
    kind = _inferred(default) if entry is None else _declared(entry)
    if kind is Any:
        return None
    try:
        _adapter(kind).validate_python(value)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        got = err["input"]
        return (
            where,
            f"{message[:1].lower()}{message[1:]}, got {type(got).__name__} {got!r} (the default is {default!r})",
        )
    return None


def resolve(value: str) -> Path:
    """Where a directory parameter points, as the kernel (whose working directory is the checkout) reads it."""
    return Path(os.path.normpath(REPO_ROOT / value))
