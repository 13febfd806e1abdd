"""What a cut buys in time per inference: the device's time estimated from the vendor's published figures, the
transfers at the link's published rate, the host's segments measured here, and whether the device pays off."""
