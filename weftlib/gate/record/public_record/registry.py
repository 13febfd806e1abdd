"""The builder registry: each topic module marks its builders with `@case(...)`, so a case's name is written once
in the code, beside the graph that rebuilds it (`params/device_ops.yaml` is the other place, as data)."""

from __future__ import annotations

from collections.abc import Callable

import onnx

Build = Callable[[], onnx.ModelProto]

BUILDERS: dict[str, Build] = {}
"""Every rebuilt `public_record` case by name, in the order the topic modules register them."""


def case(*names: str) -> Callable[[Build], Build]:
    """Registers the decorated builder as the rebuild of each named case (several outcomes may share a graph).

    A name already registered, or none given, is refused before anything is registered."""

    def register(build: Build) -> Build:
        where = f"{build.__module__}.{build.__qualname__}"
        if not names:
            raise ValueError(f"@case on {where} names no public_record case")
        for name in names:
            if name in BUILDERS:
                other = BUILDERS[name]
                raise ValueError(
                    f"public_record case {name!r} is built twice: by {other.__module__}.{other.__qualname__} and {where}"
                )
        if len(set(names)) != len(names):
            raise ValueError(f"@case on {where} names a case twice: {names}")
        BUILDERS.update(dict.fromkeys(names, build))
        return build

    return register
