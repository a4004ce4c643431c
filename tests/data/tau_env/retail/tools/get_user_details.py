# A schema only: the importer reads get_info() and never runs this module.
from typing import Any


class GetUserDetails:
    @staticmethod
    def invoke(data: dict[str, Any], **kwargs: Any) -> str:
        raise NotImplementedError("fixture: never run")

    @staticmethod
    def get_info() -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": "get_user_details",
                "description": "Show a shopper's profile.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "user_id": {
                            "type": "string",
                            "description": "The user id, such as 'ada_lane_1'."
                        }
                    },
                    "required": [
                        "user_id"
                    ]
                }
            }
        }
