"""What each notebook's parameters may hold: the type of its `parameters` cell's default, narrowed by a table.

A value that passes here cannot fail late, or pass vacuously, for a reason the plan could have shown: a
tolerance is finite and positive (an infinite one would make every equality assert pass), a thread count is
at least 1, a choice is one of its allowed values, and list items have the type the default's items have.
Values are checked strictly (pydantic, strict mode): no string stands for a number, no bool for an int; an
int may stand for a float. Parameters that name a directory of code the notebook executes (`hub_dir`,
`host_root`) are marked, so the run can say which outside code it ran.

The allowed choices are read from the packages that define them, only when a plan gives such a value.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Callable, Literal

from pydantic import AfterValidator, ConfigDict, Field, TypeAdapter, ValidationError

from ..paths import REPO_ROOT

Tolerance = Annotated[float, Field(gt=0, allow_inf_nan=False)]  # finite and positive
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]  # a limit: memory, a ratio
Count = Annotated[int, Field(ge=1)]  # sizes, repeats, threads
Pair = Annotated[list[Count], Field(min_length=2, max_length=2)]


def _directory(value: str) -> str:
    if value and not (REPO_ROOT / value).is_dir():  # the kernel runs in the checkout: relative paths start there
        raise ValueError(f"no directory {value!r} (a relative path is read from the repository root)")
    return value


Directory = Annotated[str, AfterValidator(_directory)]  # "" for the stand-in, else an existing directory


@dataclass(frozen=True)
class OutsideCode:
    """A parameter naming a directory whose code the notebook executes (a checkout, a hub repository)."""

    what: str


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


def _dtypes() -> tuple[str, ...]:
    from ..sparse.memory import DTYPES

    return tuple(DTYPES)


CONSTRAINTS: dict[str, dict[str, Any]] = {
    "00_overview": {"appendix_ram_gib": Positive},
    "01_trace_natten": {
        "host_root": OutsideCode("a Pixal3D checkout: its model code is imported and run"),
        "hub_dir": OutsideCode("a NAF hub repository: its hubconf.py and model code are run"),
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
        "threads": Count,
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
            ),
            Count,
        ),
        "equality_atol": Tolerance,
        "export_atol": Tolerance,
        "bench_sizes": list[Count],
        "bench_naf": list[Pair],  # [size, low] per NAF geometry
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
                "measure_threads",
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
        "ratio_limit": Positive,
        "device_memory_gib": Positive,
    },
    "05_export_dit_block": {
        "host_root": OutsideCode("a Pixal3D checkout: its model code is imported and run"),
        "blocks": Count,
        "channels": Count,
        "global_tokens": Count,
        "seed": Annotated[int, Field(ge=0)],
        "opset": Count,
        "atol": Tolerance,
        "exact_tol": Tolerance,
    },
    "06_device_cut": {"tolerance": Annotated[float, Field(ge=0, allow_inf_nan=False)]},  # 0: bit-identical
}


def outside_code(notebook: str) -> dict[str, str]:
    """{parameter: what it names} for the parameters of `notebook` that point at code the notebook runs."""
    return {k: v.what for k, v in CONSTRAINTS.get(notebook, {}).items() if isinstance(v, OutsideCode)}


def _inferred(default: Any) -> Any:
    """The type a value must have to stand in for `default` (None: anything)."""
    if default is None:
        return Any
    if isinstance(default, (list, tuple)):
        kinds = {type(item) for item in default}
        if len(kinds) == 1 and not isinstance(default[0], (list, tuple, dict)) and default[0] is not None:
            return list[_inferred(default[0])]
        return list[Any]
    if isinstance(default, dict):
        return dict[str, Any]
    return type(default)


def _declared(entry: Any) -> Any:
    if isinstance(entry, OutsideCode):
        return Directory
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
