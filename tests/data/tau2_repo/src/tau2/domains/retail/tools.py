"""A fictional toolkit in τ²'s shape: read by the importer with ast, never run."""

from typing import List, Optional  # noqa: UP035 - τ²'s own style, which the importer reads

from tau2.domains.retail.data_model import CancelReason, Note
from tau2.environment.toolkit import ToolKitBase, ToolType, is_tool


class RetailTools(ToolKitBase):
    """Tools of the fictional shop."""

    def _helper(self) -> None:
        """Not a tool: no @is_tool."""

    @is_tool(ToolType.READ)
    def get_user_details(self, user_id: str) -> dict:
        """Get the details of a user.

        Args:
            user_id: The user id, such as 'ada_park_1001'.

        Returns:
            The user.
        """

    @is_tool(ToolType.READ)
    def get_order_details(self, order_id: str) -> dict:
        """Get the status and details of an order.

        Args:
            order_id: The order id, such as '#W0000001'. Be careful
                to include the '#'.
        """

    @is_tool(ToolType.WRITE)
    def cancel_pending_order(self, order_id: str, reason: CancelReason) -> dict:
        """Cancel a pending order.

        Args:
            order_id: The order id, such as '#W0000001'.
            reason: Why the order is cancelled.
        """

    @is_tool(ToolType.READ)
    def get_item_details(self, item_id: str, notes: Optional[List[Note]] = None) -> dict:  # noqa: UP006, UP045
        """Get the details of an item.

        Args:
            item_id: The item id.
            notes: Notes to keep with the lookup.
        """

    @is_tool(ToolType.GENERIC)
    def transfer_to_human_agents(self, summary: str) -> str:
        """Transfer the user to a human agent.

        Args:
            summary: A summary of the user's issue.
        """
