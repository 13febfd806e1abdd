"""STAND-IN for the attention backend switch: read once from ATTN_BACKEND at import, `set_backend` after.

Upstream the default is flash_attn, which does not exist on a CPU machine; `sdpa` (torch) and `naive`
(explicit matmul + softmax) run anywhere.
"""

from __future__ import annotations

import os

BACKENDS = ("xformers", "flash_attn", "sdpa", "naive")
BACKEND = "flash_attn"
if os.environ.get("ATTN_BACKEND") in BACKENDS:
    BACKEND = os.environ["ATTN_BACKEND"]


def set_backend(backend: str) -> None:
    """Choose the dense attention backend for every later call."""
    global BACKEND
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
    BACKEND = backend
