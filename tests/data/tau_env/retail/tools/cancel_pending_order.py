# A schema only: the importer reads get_info() and never runs this module.
from typing import Any


class CancelPendingOrder:
    @staticmethod
    def invoke(data: dict[str, Any], **kwargs: Any) -> str:
        raise NotImplementedError("fixture: never run")

    @staticmethod
    def get_info() -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": "cancel_pending_order",
                "description": "Cancel a pending order and refund it.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "order_id": {
                            "type": "string",
                            "description": "The order id."
                        },
                        "reason": {
                            "type": "string",
                            "enum": [
                                "no longer needed",
                                "ordered by mistake"
                            ],
                            "description": "Why."
                        }
                    },
                    "required": [
                        "order_id",
                        "reason"
                    ]
                }
            }
        }
