"""CustomResourceDefinitions stored in the emulated API server, served as a real one serves them.

A CRD created (or stored with `put`) makes each of its served versions a resource at once, with its
kind, scope, short names, categories and `status` subresource in discovery; deleting it stops
serving them (its objects stay stored, unreachable, as they stay in etcd). Objects of a served
custom resource are admitted as kube-apiserver admits them (k8s.io/apiextensions-apiserver
pkg/registry/customresource/strategy.go): on create, the status is dropped when the version has a
status subresource; the schema's defaults applied (`structural.apply_defaults`); unknown fields pruned,
or a 400 strict decoding error with `fieldValidation=Strict`; the structural schema
(`structural.problems`) and the `x-kubernetes-validations` rules (Google's CEL: `cel`), a 422 naming
every field error; a write through `status` is judged the same way. Versions are not converted: each
version's objects are stored apart, and a CRD's conversion webhook and printer columns are not modelled.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import kmock

from accelpool_demo.apiserver import cel, patches, resources, structural, typed
from accelpool_demo.apiserver import validation as kube_validation
from accelpool_demo.apiserver.resources import bad_request, error
from accelpool_demo.apiserver.writes import JsonObject

CRDS = "apiextensions.k8s.io/v1/customresourcedefinitions"
Refusal = Callable[[list[str], Mapping[str, Any]], Exception]
"""What a request with `fieldValidation=Strict` is answered for these problems of the object it sent
(`unknown field "spec.x"`, `duplicate field "spec.y"`)."""
ROOT_FIELDS = ("apiVersion", "kind", "metadata")
"""An object's fields its CRD's schema does not declare and the server keeps: pkg/apiserver/schema/pruning
skips them at the root (metadata is pruned to ObjectMeta's fields: objectmeta.go)."""
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
    scale: Mapping[str, Any] | None = None
    """The version's scale subresource (specReplicasPath, statusReplicasPath, labelSelectorPath)."""

    @property
    def has_status(self) -> bool:
        return "status" in self.info.subresources


class CustomResources:
    """The custom resources the stored CRDs serve; `generation` counts their changes (the server syncs discovery)."""

    def __init__(self, native: Sequence[Mapping[str, Any]] = ()) -> None:
        self.served: dict[str, CustomResource] = {}
        """The resources the stored CRDs serve (the natively served kinds are not among them)."""
        self.native = {r.key: r for crd in native for r in served_versions(crd)}
        """The natively served kinds admitted by a CRD all the same (ComputePools, by accelpool's CRD, installed or
        not: the emulator serves them in any case)."""
        self.admitted: dict[str, CustomResource] = dict(self.native)
        """The resources whose objects are decoded and validated by a CRD's schema and rules."""
        self._of_definition: dict[str, list[str]] = {}
        self.generation = 0

    def define(self, name: str, crd: Mapping[str, Any] | None) -> None:
        """The CRD `name` as now stored (None: deleted)."""
        for key in self._of_definition.pop(name, []):
            self.served.pop(key, None)
        if crd is not None:  # the kinds served natively (ComputePools, kopf's peerings) keep their own routes
            found = [r for r in served_versions(crd) if r.key not in resources.CUSTOM]
            self.served.update({r.key: r for r in found})
            self._of_definition[name] = [r.key for r in found]
        self.admitted = {**self.native, **self.served}
        self.generation += 1

    def admit(self, key: str, candidate: JsonObject, current: Mapping[str, Any] | None, *, strict: bool) -> JsonObject:
        """The object to store for a create (`current` None) or an update, or the API server's refusal."""
        obj = self.decoded(key, candidate, strict=strict)
        if current is None and self.admitted[key].has_status:
            obj.pop("status", None)
        self.validate(key, obj, current)
        return obj

    def check_version(self, key: str, body: Any, warnings: list[str] | None) -> None:
        """400 for a body of another apiVersion than the URL's (the handler's decoding: each of its fields is
        unknown to a version the CRD does not serve, hence the warnings)."""
        custom = self.admitted[key]
        sent = body.get("apiVersion") if isinstance(body, Mapping) else None
        wanted = f"{custom.group}/{key.split('/')[1]}"
        if not sent or sent == wanted:
            return
        if warnings is not None:
            warnings += [f'unknown field "{name}"' for name in sorted(body) if name not in ROOT_FIELDS]
        raise bad_request(f"the API version in the data ({sent}) does not match the expected API version ({wanted})")

    def decoded(
        self,
        key: str,
        candidate: JsonObject,
        *,
        strict: bool,
        warnings: list[str] | None = None,
        refusal: Refusal | None = None,
        duplicates: Sequence[str] = (),
    ) -> JsonObject:
        """A copy of the object as the API server decodes it: the schema's defaults applied, unknown fields
        pruned (each a warning, or, with `fieldValidation=Strict`, a 400 strict decoding error or the
        `refusal` of the request's kind)."""
        custom = self.admitted[key]
        obj = copy.deepcopy(candidate)
        root = {name: obj.pop(name) for name in ROOT_FIELDS if name in obj}  # never pruned, never defaulted
        obj = structural.prune_nulls(custom.schema, obj)
        structural.apply_defaults(custom.schema, obj)
        pruned = sorted(structural.prune(custom.schema, obj))
        metadata = root.get("metadata")
        if isinstance(metadata, dict):
            unknown = [name for name in metadata if name not in typed.METADATA["properties"]]
            pruned = [f"metadata.{name}" for name in unknown] + pruned
            root["metadata"] = {k: v for k, v in metadata.items() if k not in unknown}
        obj = {**root, **obj}
        found = [f'duplicate field "{path}"' for path in duplicates] + [f'unknown field "{path}"' for path in pruned]
        if found and strict:
            raise (refusal or decoding_refusal(custom.kind, key.split("/")[1]))(found, candidate)
        if warnings is not None:
            warnings += found
        return obj

    def validate(self, key: str, obj: JsonObject, current: Mapping[str, Any] | None) -> None:
        """The refusal (422) of a custom object, as apiextensions-apiserver's customResourceStrategy words it
        (pkg/registry/customresource/strategy.go `Validate`, validator.go): kind and apiVersion, metadata,
        the schema (`structural.problems`), the scale subresource's paths; then, unless an error of a
        blocking type stopped them (`hasBlockingErr`: "some validation rules were not checked"), the CEL
        rules (Google's CEL: `cel`), transition rules against the stored object."""
        custom = self.admitted[key]
        errors = type_meta_errors(custom, obj, key.split("/")[1])
        if not errors:
            errors += kube_validation.metadata(obj, name_check=current is None)
            errors += [_field_error(p) for p in structural.problems(custom.schema, obj)]
            errors += scale_errors(custom.scale, obj)
        if has_rules(custom.schema):
            if any(e.reason in BLOCKING for e in errors):
                errors.append(kube_validation.FieldError("FieldValueInvalid", "<nil>", None, RULES_NOT_CHECKED))
            else:
                old = cel.ABSENT if current is None else current
                errors += [_cel_error(f) for f in cel.evaluate_rules(custom.schema, obj, old=old).failures]
        if errors:
            name = (obj.get("metadata") or {}).get("name")
            raise kube_validation.refusal(str(obj.get("kind") or custom.kind), custom.group, name, errors)


BLOCKING = frozenset(
    {"FieldValueNotSupported", "FieldValueRequired", "FieldValueTooLong", "FieldValueTooMany", "FieldValueTypeInvalid"}
)
"""Errors after which the CEL rules are not run (strategy.go `hasBlockingErr`)."""
RULES_NOT_CHECKED = (
    "some validation rules were not checked because the object was invalid; correct the existing errors to "
    "complete validation"
)
_REASONS = {
    "Invalid": "FieldValueInvalid",
    "TypeInvalid": "FieldValueTypeInvalid",
    "Required": "FieldValueRequired",
    "NotSupported": "FieldValueNotSupported",
    "TooMany": "FieldValueTooMany",
    "TooLong": "FieldValueTooLong",
}


def has_rules(schema: Any) -> bool:
    """Whether a schema has an `x-kubernetes-validations` rule anywhere (then the server runs CEL)."""
    if isinstance(schema, Mapping):
        return bool(schema.get("x-kubernetes-validations")) or any(has_rules(v) for v in schema.values())
    if isinstance(schema, list):
        return any(has_rules(v) for v in schema)
    return False


def _field_error(problem: Any) -> kube_validation.FieldError:
    """A schema problem (`structural`) as a field error; a repeated item of a set or map list is a Duplicate."""
    if str(problem.message).startswith("duplicate entries in a list of type"):
        return kube_validation.FieldError("FieldValueDuplicate", problem.path, problem.value)
    shown = kube_validation.OMIT if problem.shown is None else kube_validation.Raw(problem.shown)
    return kube_validation.FieldError(
        _REASONS.get(problem.error_type, "FieldValueInvalid"), problem.path, shown, problem.message
    )


def _cel_error(failure: cel.Failure) -> kube_validation.FieldError:
    """A rule's refusal as pkg/apiserver/schema/cel/validation.go words it: at the value's path (plus the
    rule's fieldPath), by the rule's reason (fieldErrorForReason: Forbidden and Required without the value,
    Duplicate with it, Invalid with it where it is a scalar); a rule that could not be evaluated is
    Invalid with the node's type, `<error> evaluating rule: <message>`."""
    field = failure.path.lstrip(".") + str(failure.rule.get("fieldPath") or "")
    field = field or "<nil>"
    node_type = failure.node.get("type")
    if failure.error is not None:
        detail = f"{failure.error} evaluating rule: {failure.message}"
        return kube_validation.FieldError("FieldValueInvalid", field, node_type or "", detail)
    reason = failure.rule.get("reason")
    if reason in ("FieldValueForbidden", "FieldValueRequired"):
        return kube_validation.FieldError(reason, field, kube_validation.OMIT, failure.message)
    if reason == "FieldValueDuplicate":
        return kube_validation.FieldError(reason, field, failure.value)
    shown = kube_validation.OMIT if node_type in ("object", "array") else failure.value
    return kube_validation.FieldError("FieldValueInvalid", field, shown, failure.message)


def type_meta_errors(custom: CustomResource, obj: Mapping[str, Any], version: str) -> list[kube_validation.FieldError]:
    """validator.go `ValidateTypeMeta`: the object's kind and apiVersion are the resource's."""
    errors = []
    if obj.get("kind") != custom.kind:
        errors.append(
            kube_validation.FieldError("FieldValueInvalid", "kind", obj.get("kind"), f"must be {custom.kind}")
        )
    wanted = f"{custom.group}/{version}"
    if obj.get("apiVersion") != wanted:
        errors.append(
            kube_validation.FieldError("FieldValueInvalid", "apiVersion", obj.get("apiVersion"), f"must be {wanted}")
        )
    return errors


def replicas_at(obj: Mapping[str, Any], path: str) -> tuple[int | None, str | None]:
    """The integer at a scale path (`.spec.replicas`), or why it is not one (unstructured.NestedInt64's words);
    (None, None) when the path holds nothing."""
    value: Any = obj
    for part in path.strip(".").split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None, None
        value = value[part]
    if isinstance(value, bool) or not isinstance(value, int):
        go_type = {
            dict: "map[string]interface {}",
            list: "[]interface {}",
            str: "string",
            float: "float64",
            bool: "bool",
        }
        typed_as = go_type.get(type(value), "interface {}")
        return None, f"{path} accessor error: {patches.go_printed(value)} is of the type {typed_as}, expected int64"
    return value, None


def scale_errors(scale: Mapping[str, Any] | None, obj: Mapping[str, Any]) -> list[kube_validation.FieldError]:
    """validator.go `ValidateScaleSpec`: the spec replicas path holds a non-negative int32, when set."""
    if not scale or not scale.get("specReplicasPath"):
        return []
    path = str(scale["specReplicasPath"])
    replicas, why = replicas_at(obj, path)
    if why is not None:
        return [kube_validation.FieldError("FieldValueInvalid", path, 0, why)]
    if replicas is not None and replicas < 0:
        return [kube_validation.FieldError("FieldValueInvalid", path, replicas, "should be a non-negative integer")]
    if replicas is not None and replicas > 2**31 - 1:
        return [
            kube_validation.FieldError(
                "FieldValueInvalid", path, replicas, f"should be less than or equal to {2**31 - 1}"
            )
        ]
    return []


def scale_of(scale: Mapping[str, Any], obj: Mapping[str, Any], *, reading: bool = True) -> JsonObject:
    """The autoscaling/v1 Scale of a custom object (pkg/registry/customresource/etcd.go `scaleFromCustomResource`):
    its spec replicas path (a 500 when a read finds none there; 0 for a write), the status replicas path
    (0 without), the label selector path."""
    replicas, why = replicas_at(obj, str(scale.get("specReplicasPath", "")))
    if replicas is None and why is None and reading:
        raise error(
            500,
            "InternalError",
            f'Internal error occurred: the spec replicas field "{scale.get("specReplicasPath")}" does not exist',
            {"causes": [{"message": f'the spec replicas field "{scale.get("specReplicasPath")}" does not exist'}]},
        )
    status_replicas, _ = replicas_at(obj, str(scale.get("statusReplicasPath", "")))
    metadata = obj.get("metadata") or {}
    found: JsonObject = {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: metadata[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in metadata
        },
        "spec": {"replicas": replicas or 0},
        "status": {"replicas": status_replicas or 0},
    }
    selector_path = scale.get("labelSelectorPath")
    if selector_path:
        selector: Any = obj
        for part in str(selector_path).strip(".").split("."):
            selector = selector.get(part) if isinstance(selector, Mapping) else None
        if isinstance(selector, str) and selector:
            found["status"]["selector"] = selector
    return found


def scaled(scale: Mapping[str, Any], obj: Mapping[str, Any], wanted: Mapping[str, Any]) -> JsonObject:
    """The custom object a written Scale asks for: its replicas at the spec replicas path, its
    resourceVersion (when sent) the object's precondition (etcd.go `scaleUpdatedObjectInfo`)."""
    result = copy.deepcopy(dict(obj))
    node = result
    parts = str(scale.get("specReplicasPath", "")).strip(".").split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {}) if isinstance(node.get(part), dict) or part not in node else {}
    node[parts[-1]] = (wanted.get("spec") or {}).get("replicas", 0)
    sent = (wanted.get("metadata") or {}).get("resourceVersion")
    if sent:
        result["metadata"]["resourceVersion"] = sent
    return result


def definition_errors(crd: Mapping[str, Any]) -> list[kube_validation.FieldError]:
    """A CustomResourceDefinition's schema defaults that break their own schema (apiextensions validation.go
    `validateStructuralDefaults`: the default judged at an empty path, hence `:  in body`)."""
    errors: list[kube_validation.FieldError] = []

    def walk(node: Any, path: str) -> None:
        if not isinstance(node, Mapping):
            return
        if "default" in node:
            bare = {k: v for k, v in node.items() if k != "default"}
            for problem in structural.problems(bare, copy.deepcopy(node["default"])):
                detail = str(problem.message).replace("<root> in body", " in body")
                shown = kube_validation.OMIT if problem.shown is None else kube_validation.Raw(problem.shown)
                reason = _REASONS.get(problem.error_type, "FieldValueInvalid")
                errors.append(kube_validation.FieldError(reason, f"{path}.default", shown, detail))
        for name, child in (node.get("properties") or {}).items():
            walk(child, f"{path}.properties[{name}]")
        if isinstance(node.get("items"), Mapping):
            walk(node["items"], f"{path}.items")

    versions = (crd.get("spec") or {}).get("versions") or []
    for index, version in enumerate(versions):
        schema = ((version or {}).get("schema") or {}).get("openAPIV3Schema")
        # one schema for every version is validated as the internal type's spec.validation
        root = (
            "spec.validation.openAPIV3Schema"
            if len(versions) == 1
            else f"spec.versions[{index}].schema.openAPIV3Schema"
        )
        walk(schema, root)
        if isinstance(schema, Mapping):
            errors += [_rule_error(problem) for problem in cel.check_rules(schema, root)]
    return errors


def _rule_error(problem: cel.RuleProblem) -> kube_validation.FieldError:
    """A rule that does not compile, as apiextensions validation.go refuses it: the whole ValidationRule
    (its Go struct in JSON) as the bad value."""
    rule = problem.rule
    printed = {
        "Rule": rule.get("rule", ""),
        "Message": rule.get("message", ""),
        "MessageExpression": rule.get("messageExpression", ""),
        "Reason": rule.get("reason"),
        "FieldPath": rule.get("fieldPath", ""),
        "OptionalOldSelf": rule.get("optionalOldSelf"),
    }
    shown = kube_validation.Raw(go_json(printed))
    return kube_validation.FieldError("FieldValueInvalid", problem.field, shown, problem.detail)


def go_json(value: Any) -> str:
    """encoding/json's Marshal: compact, with <, > and & escaped for HTML."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def established(crd: Mapping[str, Any], now: str) -> JsonObject | None:
    """The status the CRD controllers give a new CustomResourceDefinition (its names accepted, established:
    apiextensions-apiserver pkg/controller/status and establish), or None when it has it."""
    status = dict(crd.get("status") or {})
    if any(c.get("type") == "Established" for c in status.get("conditions") or []):
        return None
    names = dict((crd.get("spec") or {}).get("names") or {})
    status["acceptedNames"] = names
    status["conditions"] = [
        {
            "type": "NamesAccepted",
            "status": "True",
            "lastTransitionTime": now,
            "reason": "NoConflicts",
            "message": "no conflicts found",
        },
        {
            "type": "Established",
            "status": "True",
            "lastTransitionTime": now,
            "reason": "InitialNamesAccepted",
            "message": "the initial names have been accepted",
        },
    ]
    return status


def decoding_refusal(kind: str, version: str) -> Refusal:
    """The 400 of a body that is decoded strictly (k8s.io/apimachinery/pkg/runtime/serializer: strict
    decoding errors, wrapped by the handlers as `KIND in version "V" cannot be handled as a KIND`)."""

    def refused(problems: list[str], obj: Mapping[str, Any]) -> Exception:
        found = ", ".join(problems)
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
        scale = (version.get("subresources") or {}).get("scale")
        found.append(
            CustomResource(f"{group}/{version['name']}/{plural}", str(names.get("kind")), group, schema, info, scale)
        )
    return found
