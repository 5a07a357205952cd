"""The spec's layouts (TYPE:COUNT[:MARKET], flexible ones) and node ranges, and the strict base of every spec model.

Pure: no sibling of the spec package is imported here (model.py builds on it)."""
from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Market = Literal["spot", "on-demand"]
MAX_NODES = 64

LAYOUT_RE = re.compile(r"^(?P<type>(ml\.)?[a-z0-9-]+\.[a-z0-9]+):(?P<count>-?\d+)(:(?P<market>spot|on-demand))?$")
# A flexible layout (spec/flexible.py): 'g5:1xA10G:4:spot' (the family's sizes with one A10G) or a list of types,
# 'g5.2xlarge|g5.4xlarge:4:spot'.
FLEXIBLE_LAYOUT_RE = re.compile(r"^(?P<type>[a-z0-9-]+:\d{1,3}x[A-Za-z0-9-]+|(ml\.)?[a-z0-9-]+\.[a-z0-9]+"
                                r"(\|(ml\.)?[a-z0-9-]+\.[a-z0-9]+)+):(?P<count>-?\d+)(:(?P<market>spot|on-demand))?$")



def _clip(value: object, limit: int = 60) -> str:
    """repr() of a user's value for a one-line message: escaped, and cut short."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 5] + "...'"


class Strict(BaseModel):
    # allow_inf_nan=False: .inf and .nan are valid YAML floats, but no field of a spec means them
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class NodeRange(Strict):
    min: int = Field(1, ge=1)
    max: int = Field(8, ge=1, le=MAX_NODES)

    @model_validator(mode="after")
    def ordered(self) -> NodeRange:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is larger than max ({self.max})")
        return self


class Layout(Strict):
    instance_type: str
    count: int = Field(ge=1, le=MAX_NODES)
    market: Market | None = None

    @classmethod
    def parse(cls, text: str) -> Layout:
        """'g5.2xlarge:4:spot' -> Layout. Raises ValueError with the fix."""
        m = (LAYOUT_RE.match(text.strip()) or FLEXIBLE_LAYOUT_RE.match(text.strip())) if len(text) <= 300 else None
        if not m:
            if len(text) <= 100 and LAYOUT_RE.match(text.strip().lower()):
                raise ValueError(f"layout {_clip(text)}: instance types and markets are lower case; did you mean "
                                 f"{text.strip().lower()!r}?")
            raise ValueError(f"layout {_clip(text)} is not TYPE:COUNT[:MARKET], e.g. g5.2xlarge:4:spot, or a "
                             "flexible FAMILY:NxACCELERATOR:COUNT[:MARKET], e.g. g5:1xA10G:4:spot")
        count = int(m["count"])
        if not 1 <= count <= MAX_NODES:
            raise ValueError(f"layout {_clip(text)}: the node count must be between 1 and {MAX_NODES}")
        name = "|".join(t.removeprefix("ml.") for t in m["type"].split("|"))
        return cls(instance_type=name, count=count, market=m["market"])

    def __str__(self) -> str:
        return f"{self.instance_type}:{self.count}" + (f":{self.market}" if self.market else "")
