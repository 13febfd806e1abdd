"""weftlib: the library behind the RFD 1129 investigation notebooks."""
