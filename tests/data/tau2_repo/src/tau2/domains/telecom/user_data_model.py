"""A fictional phone's models in τ²'s shape (read with ast)."""

from enum import Enum


class NetworkModePreference(str, Enum):
    FOUR_G_5G_PREFERRED = "4g_5g_preferred"
    TWO_G_ONLY = "2g_only"
