"""The base of every ComputePool model, and `Rule`: one cross-field rule in CEL and in Python.

`accelpool_api.crd` writes each model's `rules` into the CRD as `x-kubernetes-validations`; the models
check the same rules in Python (`RuledModel`), so the schema and `accelpool validate` agree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel


@dataclass(frozen=True)
class Rule:
    """A cross-field rule, declared once: its CEL text goes into the CRD, and `holds` is the same rule
    in Python, for the models and `accelpool validate`.

    `holds` gets what CEL's `self` is: the object as on the wire (camelCase keys, absent fields absent)
    after the schema's scalar defaults, so the rule can be checked, as the API server checks it, even
    where another field of the object is out of range.
    """

    cel: str
    holds: Callable[[Mapping[str, Any]], bool]
    message: str
    field: str | None = None
    """The field the rule is about (its error path), when it is about one field."""
    message_expression: str = ""
    """CEL for a message that names the bad value (the CRD's `messageExpression`); `message` stays the
    server's fallback and the rule's name in Python."""
    explain: Callable[[Mapping[str, Any]], str] | None = None
    """`message_expression` in Python: the same words from the same `self`."""

    def message_for(self, wire: Mapping[str, Any]) -> str:
        """The message the API server shows for `wire` (what CEL's `self` is) failing the rule."""
        return self.explain(wire) if self.explain is not None else self.message


def cel_string(text: str) -> str:
    r"""`text` as a CEL string literal, single-quoted, with its backslashes and quotes escaped.

    Every value a rule embeds (a regular expression above all) goes through here: CEL's grammar
    (cel-spec doc/langdef.md, "String and Bytes Values") knows only the escapes \\ \' \" \? \` \a \b \f
    \n \r \t \v, octal, hex and unicode, so a pattern's `\.` written raw into a literal is a syntax error
    on a real API server (cel-go's parser), however a lenient parser takes it.
    """
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


class Model(BaseModel):
    """camelCase on the wire, snake_case in Python, unknown fields rejected, types strict (as the API server's)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_enum_values=True,
        strict=True,
    )
    rules: ClassVar[tuple[Rule, ...]] = ()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if cls.rules and not issubclass(cls, RuledModel):
            raise TypeError(f"{cls.__name__} declares rules: derive it from RuledModel so they are checked")


class RuledModel(Model):
    """A model with cross-field `rules`, checked after its fields (status models, built by the operator, have none)."""

    @model_validator(mode="after")
    def _check_rules(self) -> RuledModel:
        wire = self.model_dump(by_alias=True, exclude_none=True)
        for rule in type(self).rules:
            if not rule.holds(wire):
                raise ValueError(rule.message)
        return self
