"""Placeholder until its issue lands: adds no commands."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def add_commands(sub: Any) -> dict[str, Callable[[argparse.Namespace], int]]:
    return {}
