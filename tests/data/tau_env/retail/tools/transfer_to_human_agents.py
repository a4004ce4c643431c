# A schema only: the importer reads get_info() and never runs this module.
from typing import Any


class TransferToHumanAgents:
    @staticmethod
    def invoke(data: dict[str, Any], **kwargs: Any) -> str:
        raise NotImplementedError("fixture: never run")

    @staticmethod
    def get_info() -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": "transfer_to_human_agents",
                "description": "Hand the shopper to a person.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "summary": {
                            "type": "string",
                            "description": "What the shopper needs."
                        }
                    },
                    "required": [
                        "summary"
                    ]
                }
            }
        }
