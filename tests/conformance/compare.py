"""How a response of the emulator is held against the one recorded from the real kube-apiserver.

The transcripts' README.md says what was normalized in the recording and what varies between runs of
the real server; both are applied here, to the emulator's answer and (where it is not already so) to
the recorded one:

- normalization: uids and any UUID in a string → `<uid>`; resourceVersions → `<resourceVersion>`
  (and the numbers of the messages that quote them); the values of time fields → `<timestamp>` (in
  the answers even those the requests sent, as the recording has them); `continue` tokens → `<continue>`;
- what varies between runs, so is not compared: the TTL controller's `node.alpha.kubernetes.io/ttl`
  annotation and kube-controller-manager's managedFields entry (their presence depends on timing),
  the order of the causes of a 422 (compared as a multiset; the bracketed list of its message as a
  set), and how many watch BOOKMARK events arrive;
- a recorded body trimmed to the part a step is about (one without kind, apiVersion and metadata)
  is compared on the keys it holds only, at every depth (`name`: the object's name, `names`: the
  names of a list's items, a string where the object has an `involvedObject`: that one's name,
  `<generated>` in its metadata: a name made from its `generateName`); a
  trimmed list's items are compared whatever their order (the recorder sorted them: in
  dra/dra-device-taint-eviction/07 a pod's eviction Event comes before its earlier Scheduled one, while
  the server lists Events by name, which client-go makes of the pod's name and the time); a watch
  recorded only by its first event types and count (history from earlier runs) is compared on its
  ERROR events only.

`differences(step, outcome)` lists every difference, each readable on its own (with a diff of the
two bodies, normalized, as YAML).
"""

from __future__ import annotations

import copy
import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from tests.conformance.transcripts import Step

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIME_KEYS = frozenset(
    {
        "creationTimestamp",
        "deletionTimestamp",
        "time",
        "lastTransitionTime",
        "lastHeartbeatTime",
        "lastProbeTime",
        "eventTime",
        "firstTimestamp",
        "lastTimestamp",
        "deprecatedFirstTimestamp",
        "deprecatedLastTimestamp",
        "allocationTimestamp",
        "timeAdded",
    }
)
"""The keys whose values are the server's times (README: "and similar keys")."""
EMBEDDED = re.compile(r'(\\?"(?:' + "|".join(sorted(TIME_KEYS)) + r')\\?":\s*\\?")[^"\\]*(\\?")')
EMBEDDED_UID = re.compile(r'(\\?"uid\\?":\s*\\?")[^"\\]*(\\?")')
EMBEDDED_VERSION = re.compile(r'(\\?"resourceVersion\\?":\s*\\?")[0-9]+(\\?")')
PRECONDITION = re.compile(
    r"(ResourceVersion in the precondition \()[^)]*(\) does not match the ResourceVersion in record \()[^)]*\)"
)
TOO_LARGE = re.compile(r"Too large resource version: [0-9]+, current: [0-9]+")
TTL_ANNOTATION = "node.alpha.kubernetes.io/ttl"
"""The TTL controller's annotation (kube-controller-manager): present or not depending on timing."""
CONTROLLER_MANAGER = "kube-controller-manager"
GENERATED = "<generated>"
"""How the recording wrote a name the server generated (dra/dra-scheduling/25), in a trimmed body."""
GENERATED_SUFFIX = re.compile(r"[bcdfghjklmnpqrstvwxz2456789]{5}")
WATCH_KEYS = ("annotations", "labels", "name", "object", "type")
"""How the recorder wrote each watch event: the object's name, labels and annotations beside it."""


@dataclass
class Outcome:
    """What the emulator answered a step."""

    code: int | None
    content_type: str | None
    warnings: list[str] = field(default_factory=list)
    body: Any = None
    events: list[dict[str, Any]] | None = None
    """The events of a watch stream, in order, until the server ended it."""
    observed: frozenset[str] | None = None
    """For an observation step: the objects stored once the controllers had their time (`resource|ns|name`)."""


# ---------------------------------------------------------------- normalization


def normalize(value: Any, key: str | None = None) -> Any:
    """A response body as the recording normalized it."""
    if isinstance(value, Mapping):
        result = {UUID.sub("<uid>", str(k)): normalize(v, str(k)) for k, v in value.items()}
        if key == "metadata" and isinstance(result.get("continue"), str) and result["continue"]:
            result["continue"] = "<continue>"
        return result
    if isinstance(value, list):
        return [normalize(v, key) for v in value]
    if not isinstance(value, str) or value.startswith("<"):
        return value
    if key == "uid":
        return "<uid>"
    if key == "resourceVersion":
        return "<resourceVersion>"
    if key in TIME_KEYS:
        return "<timestamp>"
    return normalize_text(value)


def normalize_text(text: str) -> str:
    text = EMBEDDED.sub(r"\1<timestamp>\2", text)
    text = EMBEDDED_UID.sub(r"\1<uid>\2", text)
    text = EMBEDDED_VERSION.sub(r"\1<resourceVersion>\2", text)
    text = PRECONDITION.sub(r"\1<resourceVersion>\2<resourceVersion>)", text)
    text = TOO_LARGE.sub("Too large resource version: <requested>, current: <current>", text)
    return UUID.sub("<uid>", text)


def ignoring_what_varies(value: Any) -> Any:
    """A copy without what varies between runs of the real server (see the module docstring), the UUIDs
    the recording left in map keys (a managedFields `k:{"uid":...}`) normalized as its values are."""
    value = _keys_normalized(copy.deepcopy(value))
    _drop_varying(value)
    return value


def _keys_normalized(value: Any) -> Any:
    if isinstance(value, dict):
        return {UUID.sub("<uid>", str(k)): _keys_normalized(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_keys_normalized(v) for v in value]
    return value


def _drop_varying(value: Any) -> None:
    if isinstance(value, list):
        for item in value:
            _drop_varying(item)
        return
    if not isinstance(value, dict):
        return
    annotations = value.get("annotations")  # an object's metadata, or a watch event's copy of it
    if isinstance(annotations, dict) and TTL_ANNOTATION in annotations:
        del annotations[TTL_ANNOTATION]
        if not annotations and "object" in value:
            value["annotations"] = None
        elif not annotations:
            del value["annotations"]
    entries = value.get("managedFields")
    if isinstance(entries, list):
        value["managedFields"] = [e for e in entries if e.get("manager") != CONTROLLER_MANAGER]
    details = value.get("details")
    if value.get("kind") == "Status" and isinstance(details, dict) and isinstance(details.get("causes"), list):
        causes = details["causes"]
        value["message"] = _message_as_set(str(value.get("message", "")), causes)
        details["causes"] = sorted(causes, key=lambda c: json.dumps(c, sort_keys=True))
    for child in value.values():
        _drop_varying(child)


def _message_as_set(message: str, causes: list[Any]) -> str:
    """`X is invalid: [a, b]` with its bracketed items (the causes' `field: message`) sorted."""
    if not message.endswith("]") or ": [" not in message:
        return message
    prefix, _, inner = message[:-1].partition(": [")
    items = list(dict.fromkeys(f"{c.get('field', '<nil>')}: {c.get('message', '')}" for c in causes))
    if len(", ".join(items)) != len(inner) or not all(item in inner for item in items):
        return message
    return f"{prefix}: [{', '.join(sorted(items))}]"


# ---------------------------------------------------------------- trimmed bodies


def is_whole(body: Any) -> bool:
    """Whether a recorded body is a whole object or Status (else it was trimmed to some keys)."""
    return isinstance(body, Mapping) and (
        {"kind", "apiVersion", "metadata"} <= set(body) or body.get("kind") == "Status"
    )


def projected(recorded: Any, actual: Any, top: bool = True) -> Any:
    """The emulator's answer cut to the keys a trimmed recorded body holds (at every depth)."""
    if isinstance(recorded, Mapping):
        source = actual if isinstance(actual, Mapping) else {}
        result = {}
        for key, value in recorded.items():
            if top and key == "name" and "name" not in source:
                result[key] = (source.get("metadata") or {}).get("name")
            elif top and key == "names" and "names" not in source:
                result[key] = [(i.get("metadata") or {}).get("name") for i in source.get("items") or []]
            elif key == "involvedObject" and isinstance(value, str) and isinstance(source.get(key), Mapping):
                result[key] = source[key].get("name")
            elif key == "name" and value == GENERATED and _is_generated(source):
                result[key] = GENERATED
            elif top and key == "items" and isinstance(value, list) and isinstance(source.get(key), list):
                result[key] = _matched(value, source[key])
            else:
                result[key] = projected(value, source.get(key), top=False)
        return result
    if isinstance(recorded, list) and isinstance(actual, list):
        return [projected(r, a, top=False) for r, a in zip(recorded, actual, strict=False)] + actual[len(recorded) :]
    return actual


def _is_generated(metadata: Mapping[str, Any]) -> bool:
    """Whether an object's name is one the server generated from its `generateName` (its random suffix:
    k8s.io/apiserver/pkg/storage/names/generate.go)."""
    name, prefix = str(metadata.get("name") or ""), metadata.get("generateName")
    return bool(prefix) and GENERATED_SUFFIX.fullmatch(name.removeprefix(str(prefix))) is not None and name != prefix


def _matched(recorded: list[Any], actual: list[Any]) -> list[Any]:
    """A trimmed list's items projected, each recorded one paired with an actual one it matches wherever that
    is (the rest in their order after them)."""
    left = list(actual)
    result = []
    for want in recorded:
        found = next((i for i, item in enumerate(left) if projected(want, item, top=False) == want), None)
        if found is None:
            continue
        result.append(projected(want, left.pop(found), top=False))
    unmatched = [r for r in recorded if r not in result]
    return result + [projected(r, a, top=False) for r, a in zip(unmatched, left, strict=False)] + left[len(unmatched) :]


# ---------------------------------------------------------------- comparing


def differences(step: Step, outcome: Outcome) -> list[str]:
    """Every way the emulator's answer differs from the recorded one (empty: it matches)."""
    recorded = step.response
    found = []
    if outcome.code != recorded.get("code"):
        found.append(f"status code: recorded {recorded.get('code')}, emulator {outcome.code}")
    if outcome.content_type != recorded.get("contentType"):
        found.append(f"Content-Type: recorded {recorded.get('contentType')!r}, emulator {outcome.content_type!r}")
    if list(recorded.get("warnings") or []) != outcome.warnings:
        found.append(f"Warning headers: recorded {recorded.get('warnings') or []}, emulator {outcome.warnings}")
    if "errorEvents" in recorded:  # a watch whose history is not reproducible: only that it has no errors
        errors = [normalize(e) for e in outcome.events or [] if e.get("type") == "ERROR"]
        if errors != list(recorded["errorEvents"]):
            found.append(f"ERROR events: recorded {recorded['errorEvents']}, emulator {errors}")
    if "events" in recorded:
        found += _event_differences(recorded, outcome)
    elif "body" in recorded and recorded.get("code") is not None:
        want = ignoring_what_varies(recorded["body"])
        got = ignoring_what_varies(normalize(outcome.body))
        if not is_whole(want):
            got = projected(want, got)
        if want != got:
            found.append("body differs (- recorded, + emulator):\n" + _diff(want, got))
    return found


def _event_differences(recorded: Mapping[str, Any], outcome: Outcome) -> list[str]:
    events = [_as_recorded(e) for e in outcome.events or []]
    want = [e for e in ignoring_what_varies(recorded["events"]) if e.get("type") != "BOOKMARK"]
    got = [e for e in ignoring_what_varies(events) if e.get("type") != "BOOKMARK"]
    found = []
    if want != got:
        found.append("watch events other than BOOKMARKs differ (- recorded, + emulator):\n" + _diff(want, got))
    bookmarks = {json.dumps(e, sort_keys=True) for e in recorded["events"] if e.get("type") == "BOOKMARK"}
    seen = {json.dumps(e, sort_keys=True) for e in events if e.get("type") == "BOOKMARK"}
    if bookmarks and not seen:
        found.append(f"no BOOKMARK event (recorded: {sorted(bookmarks)})")
    elif seen - bookmarks:
        found.append(f"BOOKMARK events differ: recorded {sorted(bookmarks)}, emulator {sorted(seen)}")
    return found


def _as_recorded(event: Mapping[str, Any]) -> dict[str, Any]:
    """A watch event as the recorder wrote it: the object's name, labels and annotations beside it."""
    obj = normalize(event.get("object"))
    metadata = (obj or {}).get("metadata") or {}
    return {
        "annotations": metadata.get("annotations"),
        "labels": metadata.get("labels"),
        "name": metadata.get("name"),
        "object": obj,
        "type": event.get("type"),
    }


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def _diff(want: Any, got: Any) -> str:
    def dump(value: Any) -> list[str]:
        text: str = yaml.dump(value, Dumper=_Dumper, sort_keys=True, width=100, default_flow_style=False)
        return text.splitlines()

    return "\n".join(difflib.unified_diff(dump(want), dump(got), "recorded", "emulator", lineterm="", n=4))
