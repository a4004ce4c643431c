"""A fictional phone's toolkit in τ²'s shape: read by the importer with ast, never run."""

from typing import Union

from tau2.domains.telecom.user_data_model import NetworkModePreference
from tau2.environment.toolkit import ToolKitBase, ToolType, is_tool


class TelecomUserTools(ToolKitBase):
    """The phone's tools."""

    def set_user_info(self, name: str, phone_number: str):
        """Setup, not a tool."""

    @is_tool(ToolType.READ)
    def check_status_bar(self) -> str:
        """Shows the phone's status bar."""

    @is_tool(ToolType.WRITE)
    def toggle_data(self) -> str:
        """Toggles mobile data ON or OFF."""

    @is_tool(ToolType.WRITE)
    def toggle_roaming(self) -> str:
        """Toggles data roaming ON or OFF."""

    @is_tool(ToolType.WRITE)
    def set_network_mode_preference(self, mode: Union[NetworkModePreference, str]) -> str:  # noqa: UP007
        """Changes the network the phone prefers."""
