# A schema only: the importer reads get_info() and never runs this module.
from typing import Any


class FindUserIdByEmail:
    @staticmethod
    def invoke(data: dict[str, Any], **kwargs: Any) -> str:
        raise NotImplementedError("fixture: never run")

    @staticmethod
    def get_info() -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": "find_user_id_by_email",
                "description": "Look up a shopper's user id from their email address.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "email": {
                            "type": "string",
                            "description": "The shopper's email."
                        }
                    },
                    "required": [
                        "email"
                    ]
                }
            }
        }
