# A schema only: the importer reads get_info() and never runs this module.
from typing import Any


class GetOrderDetails:
    @staticmethod
    def invoke(data: dict[str, Any], **kwargs: Any) -> str:
        raise NotImplementedError("fixture: never run")

    @staticmethod
    def get_info() -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": "get_order_details",
                "description": "Show an order.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "order_id": {
                            "type": "string",
                            "description": "The order id, such as '#C100'."
                        }
                    },
                    "required": [
                        "order_id"
                    ]
                }
            }
        }
