"""STAND-IN hub entry shaped like valeoai/NAF's hubconf.py (random weights; nothing is downloaded)."""

dependencies = ["torch", "natten"]

from naf_standin.naf import NAFStandIn  # noqa: E402


def naf(pretrained: bool = False, device: str = "cpu", **kwargs) -> NAFStandIn:
    """The stand-in upsampler. kwargs: channels, qk_dim, heads, kernel_size, seed."""
    if pretrained:
        raise ValueError("pretrained: the NAF stand-in has no weights; call with pretrained=False")
    return NAFStandIn(**kwargs).to(device)
