"""`ComputePool`: the whole object as it comes from the API server or a YAML file."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from accelpool_api.spec import ComputePoolSpec
from accelpool_api.status import ComputePoolStatus


class ObjectMeta(BaseModel):
    """What the API server decodes of metadata; the name's rules are `name_problems`, in the server's order."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    name: str = ""
    generation: int | None = None


class ComputePool(BaseModel):
    """The whole object as it comes from the API server or a YAML file."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    api_version: Literal["accelpool.io/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["ComputePool"]
    metadata: ObjectMeta
    spec: ComputePoolSpec
    status: ComputePoolStatus | None = None
