# A schema only: the importer reads get_info() and never runs this module.
from typing import Any


class ModifyPendingOrderPayment:
    @staticmethod
    def invoke(data: dict[str, Any], **kwargs: Any) -> str:
        raise NotImplementedError("fixture: never run")

    @staticmethod
    def get_info() -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": "modify_pending_order_payment",
                "description": "Pay a pending order with another payment method.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "order_id": {
                            "type": "string",
                            "description": "The order id."
                        },
                        "payment_method_id": {
                            "type": "string",
                            "description": "The new payment method's id."
                        }
                    },
                    "required": [
                        "order_id",
                        "payment_method_id"
                    ]
                }
            }
        }
