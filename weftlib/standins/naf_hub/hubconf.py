"""STAND-IN hub entry shaped like valeoai/NAF's hubconf.py (random weights; nothing is downloaded)."""

dependencies = ["torch", "natten"]

from naf_standin.naf import NAFStandIn  # noqa: E402


def naf(pretrained: bool = False, device: str = "cpu", **kwargs) -> NAFStandIn:
    """The stand-in upsampler. kwargs (the real entry takes none; its model's defaults are these): dim,
    heads_attn, heads_rope, kernel_size, img_layers, rope_base, seed."""
    if pretrained:
        raise ValueError("pretrained: the NAF stand-in has no weights; call with pretrained=False")
    return NAFStandIn(**kwargs).to(device)
