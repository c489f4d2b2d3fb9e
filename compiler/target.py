"""Targets are vocabulary (backends describe their devices with them): see :mod:`hetero.target`."""

from hetero.target import DIALECTS, FEATURES, Target

__all__ = ["DIALECTS", "FEATURES", "Target"]
