"""STAND-IN model code for the NAF-shaped hub repository (random weights)."""
