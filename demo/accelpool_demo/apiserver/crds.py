"""CustomResourceDefinitions stored in the emulated API server, served as a real one serves them.

A CRD created (or stored with `put`) makes each of its served versions a resource at once, with its
kind, scope, short names, categories and `status` subresource in discovery; deleting it stops
serving them (its objects stay stored, unreachable, as they stay in etcd). Objects of a served
custom resource are admitted as kube-apiserver admits them (k8s.io/apiextensions-apiserver
pkg/registry/customresource/strategy.go): on create, the status is dropped when the version has a
status subresource; the schema's defaults applied (`structural.apply_defaults`); unknown fields pruned,
or a 400 strict decoding error with `fieldValidation=Strict`; the structural schema
(`structural.problems`) and the `x-kubernetes-validations` CEL rules (when the server was given an
evaluator: `CelRules`, since cel-python is a test dependency, not the demo's), a 422 naming every
field error; a write through `status` is judged the same way. Versions are not converted: each
version's objects are stored apart, and a CRD's conversion webhook and printer columns are not modelled.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import kmock

from accelpool_demo.apiserver import resources, structural
from accelpool_demo.apiserver.resources import bad_request, error
from accelpool_demo.apiserver.writes import JsonObject

CRDS = "apiextensions.k8s.io/v1/customresourcedefinitions"
Refusal = Callable[[list[str], Mapping[str, Any]], Exception]
"""What a request with `fieldValidation=Strict` is answered when these fields of the object are unknown."""
CelRules = Callable[[Mapping[str, Any], Any, Any], list[str]]
"""(schema, object, stored object or None) → the messages of the CEL rules that reject it (`path: message`)."""


@dataclass(frozen=True)
class CustomResource:
    """One served version of a CRD."""

    key: str
    """`group/version/plural`, as `resources.RESOURCES` keys resources."""
    kind: str
    group: str
    schema: Mapping[str, Any]
    info: kmock.ResourceInfo

    @property
    def has_status(self) -> bool:
        return "status" in self.info.subresources


class CustomResources:
    """The custom resources the stored CRDs serve; `generation` counts their changes (the server syncs discovery)."""

    def __init__(self) -> None:
        self.served: dict[str, CustomResource] = {}
        self._of_definition: dict[str, list[str]] = {}
        self.generation = 0

    def define(self, name: str, crd: Mapping[str, Any] | None) -> None:
        """The CRD `name` as now stored (None: deleted)."""
        for key in self._of_definition.pop(name, []):
            self.served.pop(key, None)
        if crd is not None:  # the kinds served natively (ComputePools, kopf's peerings) keep their own admission
            found = [r for r in served_versions(crd) if r.key not in resources.CUSTOM]
            self.served.update({r.key: r for r in found})
            self._of_definition[name] = [r.key for r in found]
        self.generation += 1

    def admit(
        self, key: str, candidate: JsonObject, current: Mapping[str, Any] | None, *, strict: bool, cel: CelRules | None
    ) -> JsonObject:
        """The object to store for a create (`current` None) or an update, or the API server's refusal."""
        obj = self.decoded(key, candidate, strict=strict)
        if current is None and self.served[key].has_status:
            obj.pop("status", None)
        self.validate(key, obj, current, cel=cel)
        return obj

    def decoded(
        self,
        key: str,
        candidate: JsonObject,
        *,
        strict: bool,
        warnings: list[str] | None = None,
        refusal: Refusal | None = None,
    ) -> JsonObject:
        """A copy of the object as the API server decodes it: the schema's defaults applied, unknown fields
        pruned (each a warning, or, with `fieldValidation=Strict`, a 400 strict decoding error or the
        `refusal` of the request's kind)."""
        custom = self.served[key]
        obj = copy.deepcopy(candidate)
        structural.apply_defaults(custom.schema, obj)
        pruned = structural.prune(custom.schema, obj)
        if pruned and strict:
            raise (refusal or decoding_refusal(custom.kind, key.split("/")[1]))(pruned, candidate)
        if warnings is not None:
            warnings += [f'unknown field "{path}"' for path in pruned]
        return obj

    def validate(self, key: str, obj: JsonObject, current: Mapping[str, Any] | None, *, cel: CelRules | None) -> None:
        """The schema's and the CEL rules' refusal (422), if any."""
        custom = self.served[key]
        problems = [str(p) for p in structural.problems(custom.schema, obj)]
        if not problems and cel is not None:
            problems = cel(custom.schema, obj, current)
        if problems:
            raise _invalid(custom, obj, problems)


def decoding_refusal(kind: str, version: str) -> Refusal:
    """The 400 of a body that is decoded strictly (k8s.io/apimachinery/pkg/runtime/serializer: strict
    decoding errors, wrapped by the handlers as `KIND in version "V" cannot be handled as a KIND`)."""

    def refused(paths: list[str], obj: Mapping[str, Any]) -> Exception:
        found = ", ".join(f'unknown field "{path}"' for path in paths)
        return bad_request(
            f'{kind} in version "{version}" cannot be handled as a {kind}: strict decoding error: {found}'
        )

    return refused


def served_versions(crd: Mapping[str, Any]) -> list[CustomResource]:
    """The served versions of a CRD, as resources."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group, plural = spec.get("group", ""), names.get("plural", "")
    found = []
    for version in spec.get("versions") or []:
        if not version.get("served"):
            continue
        subresources = set(version.get("subresources") or {})
        info = kmock.ResourceInfo(
            kind=names.get("kind"),
            singular=names.get("singular") or str(names.get("kind", "")).lower(),
            namespaced=spec.get("scope") == "Namespaced",
            shortnames=set(names.get("shortNames") or []),
            categories=set(names.get("categories") or []),
            subresources=subresources,
            verbs=set(resources.VERBS),
        )
        schema = (version.get("schema") or {}).get("openAPIV3Schema") or {}
        found.append(CustomResource(f"{group}/{version['name']}/{plural}", str(names.get("kind")), group, schema, info))
    return found


def _invalid(custom: CustomResource, obj: Mapping[str, Any], problems: list[str]) -> kmock.KubernetesError:
    """422 as the API server words it: `Kind.group "name" is invalid: [a, b]` with a cause per problem."""
    name = (obj.get("metadata") or {}).get("name")
    listed = problems[0] if len(problems) == 1 else f"[{', '.join(problems)}]"
    causes = [{"reason": "FieldValueInvalid", "message": p, "field": p.split(":", 1)[0]} for p in problems]
    details = {"name": name, "group": custom.group, "kind": custom.kind, "causes": causes}
    return error(422, "Invalid", f'{custom.kind}.{custom.group} "{name}" is invalid: {listed}', details)
