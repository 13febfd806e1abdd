"""The rewrites made both in torch and in ONNX, as docs/gate.md pairs them: every name listed exists, and
neither of a pair bears the other's name (a table or a traceback then says which side it means)."""

from __future__ import annotations

import importlib
import re

import pytest

from tests.conftest import REPO

SECTION = "### Rewrites made twice: in torch and in ONNX"
ROW = re.compile(r"^\| ([^|`]+?) \| `(weftlib\.[\w.]+)` \| `(weftlib\.[\w.]+)` \| [^|]+ \|$")


def pairs(text: str) -> dict[str, tuple[str, str]]:
    """rewrite -> (torch name, ONNX name), read off the section's table."""
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return {m.group(1): (m.group(2), m.group(3)) for line in section.splitlines() if (m := ROW.match(line))}


PAIRS = pairs((REPO / "docs" / "gate.md").read_text())


def resolve(dotted: str) -> object:
    module, name = dotted.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def bare(dotted: str) -> str:
    """The symbol's own name, case and underscores dropped: `token_rms_norm` and `TokenRmsNorm` alike."""
    return dotted.rsplit(".", 1)[1].replace("_", "").lower()


def test_the_table_lists_the_four_pairs():
    assert sorted(PAIRS) == ["GroupNorm", "RMS head norm", "RoPE by tables", "nearest as Resize"]


@pytest.mark.parametrize("rewrite", sorted(PAIRS))
def test_each_pair_names_a_torch_and_an_onnx_rewrite_that_exist(rewrite):
    torch_side, onnx_side = PAIRS[rewrite]
    assert torch_side.startswith(("weftlib.attention.", "weftlib.dit.")), torch_side
    assert onnx_side.startswith("weftlib.gate.fix."), onnx_side
    assert callable(resolve(torch_side)) and isinstance(resolve(onnx_side), type)


@pytest.mark.parametrize("rewrite", sorted(PAIRS))
def test_neither_of_a_pair_bears_the_others_name(rewrite):
    torch_name, onnx_name = (bare(n) for n in PAIRS[rewrite])
    assert torch_name not in onnx_name and onnx_name not in torch_name, PAIRS[rewrite]


def test_a_shared_name_is_caught():
    shared = pairs(f"{SECTION}\n\n| x | `weftlib.a.GroupNorm` | `weftlib.gate.fix.b.GroupNormByReductions` | y |\n")
    torch_name, onnx_name = (bare(n) for n in shared["x"])
    assert torch_name in onnx_name
