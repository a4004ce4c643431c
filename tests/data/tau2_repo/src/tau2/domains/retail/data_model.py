"""Fictional models in τ²'s shape, read by the importer with ast."""

from typing import Literal

from pydantic import BaseModel, Field

CancelReason = Literal["no longer needed", "ordered by mistake"]


class Note(BaseModel):
    text: str = Field(description="What the note says")
    urgent: bool = Field(description="Whether it is urgent", default=False)
