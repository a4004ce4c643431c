"""A fictional carrier's toolkit in τ²'s shape: read by the importer with ast, never run."""

from tau2.environment.toolkit import ToolKitBase, ToolType, is_tool


class TelecomTools(ToolKitBase):
    """The carrier's tools."""

    @is_tool(ToolType.READ)
    def get_customer_by_id(self, customer_id: str) -> dict:
        """Retrieves a customer by their ID.

        Args:
            customer_id: The customer's ID.
        """

    @is_tool(ToolType.WRITE)
    def enable_roaming(self, customer_id: str, line_id: str) -> str:
        """Enables international roaming on a line.

        Args:
            customer_id: ID of the customer who owns the line.
            line_id: ID of the line.
        """

    @is_tool(ToolType.WRITE)
    def refuel_data(self, customer_id: str, line_id: str, gb_amount: float) -> dict:
        """Adds data to a line, charged to the customer's bill.

        Args:
            customer_id: ID of the customer who owns the line.
            line_id: ID of the line.
            gb_amount: Amount of data in GB.
        """

    @is_tool(ToolType.GENERIC)
    def transfer_to_human_agents(self, summary: str) -> str:
        """Transfer the user to a human agent.

        Args:
            summary: A summary of the user's issue.
        """
