# A schema only: the importer reads get_info() and never runs this module.
from typing import Any


class Think:
    @staticmethod
    def invoke(data: dict[str, Any], **kwargs: Any) -> str:
        raise NotImplementedError("fixture: never run")

    @staticmethod
    def get_info() -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": "think",
                "description": "Think out loud; changes nothing.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "thought": {
                            "type": "string",
                            "description": "The thought."
                        }
                    },
                    "required": [
                        "thought"
                    ]
                }
            }
        }
