"""A fictional carrier's models in τ²'s shape (read with ast)."""

from enum import Enum


class LineStatus(str, Enum):
    ACTIVE = "Active"
    SUSPENDED = "Suspended"
