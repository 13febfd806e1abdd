"""weftlib.trace.checkpoint: shape mismatches and the strict-load error when a flag changes a model."""

from __future__ import annotations

import functools

import pytest
import torch
from torch import nn

from weftlib.trace import checkpoint


class Tiny(nn.Module):
    def __init__(self, wide: bool, extra: bool = False) -> None:
        super().__init__()
        self.proj = nn.Linear(8 if wide else 4, 3)
        self.head = nn.Linear(3, 2)
        if extra:
            self.gate = nn.Linear(2, 2)


def test_flag_off_reports_the_mismatch_and_the_strict_error():
    state = Tiny(wide=True).state_dict()
    on, off = checkpoint.checkpoint_compatibility(Tiny, "wide", state)
    assert on.loads and on.mismatches == () and on.strict_error == ""
    assert not off.loads
    assert off.mismatches == (checkpoint.Mismatch("proj.weight", (3, 4), (3, 8)),)
    assert "size mismatch for proj.weight" in off.strict_error and "torch.Size([3, 8])" in off.strict_error
    assert checkpoint.mismatch_records([on, off]) == [
        {"flag": "wide=False", "key": "proj.weight", "expected": [3, 4], "checkpoint": [3, 8]}
    ]


def test_missing_and_unexpected_keys_are_listed():
    state = Tiny(wide=True).state_dict()
    factory = functools.partial(Tiny, wide=True)
    (result,) = checkpoint.checkpoint_compatibility(factory, "extra", state, values=[True])
    assert result.missing == ("gate.weight", "gate.bias") and result.unexpected == ()
    assert result.mismatches == () and "Missing key(s)" in result.strict_error


def test_the_checkpoint_is_not_modified():
    state = Tiny(wide=True).state_dict()
    before = {k: v.clone() for k, v in state.items()}
    checkpoint.checkpoint_compatibility(Tiny, "wide", state)
    assert all(torch.equal(before[k], state[k]) for k in state)


def test_argument_errors_name_the_argument():
    state = Tiny(wide=True).state_dict()
    with pytest.raises(TypeError, match="factory"):
        checkpoint.checkpoint_compatibility(None, "wide", state)
    with pytest.raises(ValueError, match="flag"):
        checkpoint.checkpoint_compatibility(Tiny, "not a name", state)
    with pytest.raises(TypeError, match="state_dict"):
        checkpoint.checkpoint_compatibility(Tiny, "wide", {"proj.weight": [1, 2]})
    with pytest.raises(ValueError, match="values"):
        checkpoint.checkpoint_compatibility(Tiny, "wide", state, values=())
