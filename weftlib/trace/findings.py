"""What notebook 01 concludes from the trace: the host's image-conditioning configs as rows (with the width
the `proj_channels` rule gives each) and the answer sentence, so the notebook only calls and asserts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .checkpoint import FlagResult


def config_rows(configs: Mapping[str, Mapping[str, Any]], embed_dim: int) -> list[dict[str, Any]]:
    """One row per image-conditioning config: whether it turns NAF on, its image size and grid, and the
    conditioning width the host's rule gives it (`proj_channels = embed_dim * 2` with NAF, else `embed_dim`)."""
    return [
        {
            "config": name,
            "use_naf_upsample": bool(cfg.get("use_naf_upsample", False)),
            "image_size": cfg.get("image_size"),
            "grid_resolution": cfg.get("grid_resolution"),
            "proj_channels": embed_dim * 2 if cfg.get("use_naf_upsample") else embed_dim,
        }
        for name, cfg in configs.items()
    ]


def natten_answer(dispatch_suffix: str, audit_flag: str, flag_off: FlagResult) -> str:
    """Notebook 01's answer: where NAF's forward reaches natten (the last call of `dispatch_suffix`), how the
    audit flags it, and the first shape mismatch of a strict load with NAF off."""
    first = flag_off.mismatches[0]
    return (
        f"natten is not optional: NAF's forward reaches {dispatch_suffix.rsplit(' -> ', maxsplit=1)[-1]} through "
        f"torch.hub ({audit_flag}), and with NAF off a flow checkpoint trained with it fails a strict load (shown on "
        f"the stand-in flow model, no published weights here: {first.key} {list(first.expected)} vs "
        f"{list(first.checkpoint)})"
    )


def natten_short(dispatch_suffix: str, flag_off: FlagResult) -> str:
    """`natten_answer` at a glance (at most 40 words): the call NAF's forward reaches, and the key whose strict
    load fails with NAF off."""
    return (
        f"natten is not optional: NAF's forward reaches {dispatch_suffix.rsplit(' -> ', maxsplit=1)[-1]} through "
        f"torch.hub, and with NAF off a flow checkpoint trained with it fails a strict load "
        f"({flag_off.mismatches[0].key})."
    )
