# A schema only: the importer reads get_info() and never runs this module.
from typing import Any


class Calculate:
    @staticmethod
    def invoke(data: dict[str, Any], **kwargs: Any) -> str:
        raise NotImplementedError("fixture: never run")

    @staticmethod
    def get_info() -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": "calculate",
                "description": "Work out an arithmetic expression.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "expression": {
                            "type": "string",
                            "description": "Such as '2 + 2'."
                        }
                    },
                    "required": [
                        "expression"
                    ]
                }
            }
        }
