"""accelpool owns only what its own records say it wrote, and its names never collide.

Ownership of ConfigMap keys and of `nvidia.com/*.config` label values comes from the ConfigMaps'
managed-keys/managed-entries annotations and the live pools' own keys, never from a name that
merely starts with `accelpool-`. Config keys, DaemonSet and NodePool names are unique by
construction, however long and however cleverly chosen the pool names are.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from accelpool.decide.planning import ConfigState
from accelpool.model import nvidia
from accelpool_api import conventions

from .conftest import conditions, device_plugin_key, member, members, node, pool, run

HANDWRITTEN = "accelpool-handwritten"
HANDWRITTEN_CONFIG = "version: v1\nflags:\n  migStrategy: none\n"
DIGEST = "0123abcd"
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _config(**managed: frozenset[str]) -> ConfigState:
    return ConfigState(
        device_plugin={HANDWRITTEN: HANDWRITTEN_CONFIG, "default": nvidia.dump(nvidia.DEFAULT_DEVICE_PLUGIN_CONFIG)},
        device_plugin_managed=managed.get("device_plugin", frozenset({"default"})),
    )


def test_a_hand_written_key_with_our_prefix_is_kept_while_a_node_selects_it() -> None:
    selecting = node("n1", labels={conventions.DEVICE_PLUGIN_CONFIG_LABEL: HANDWRITTEN})
    result = run([pool("p", {"accelerator": "H100"})], [selecting, node("n2")], _config())
    assert result.device_plugin[HANDWRITTEN] == HANDWRITTEN_CONFIG
    assert HANDWRITTEN not in result.device_plugin_managed


def test_a_claimed_node_gets_its_hand_written_label_back_on_release() -> None:
    selecting = node("n1", labels={conventions.DEVICE_PLUGIN_CONFIG_LABEL: HANDWRITTEN})
    claimed = run([pool("p", {"accelerator": "H100"})], [selecting], _config())
    assert members(claimed, "p") == ["n1"]
    change = claimed.changes["n1"]
    assert change.labels[conventions.DEVICE_PLUGIN_CONFIG_LABEL] == device_plugin_key("p", {"accelerator": "H100"})
    prior = change.annotations[conventions.PRIOR_LABELS_ANNOTATION]
    assert prior is not None and HANDWRITTEN in prior

    joined = selecting.apply(change)
    released = run([pool("p", {"accelerator": "H100", "nodes": 0})], [joined], _config())
    assert released.changes["n1"].labels[conventions.DEVICE_PLUGIN_CONFIG_LABEL] == HANDWRITTEN


def test_a_foreign_label_with_our_prefix_is_not_removed_when_its_node_leaves() -> None:
    """A member whose label was set by someone else after it joined keeps that label on release."""
    stranger = member("n1", "gone", labels={conventions.DEVICE_PLUGIN_CONFIG_LABEL: HANDWRITTEN})
    result = run([], [stranger], _config())
    assert conventions.DEVICE_PLUGIN_CONFIG_LABEL not in result.changes["n1"].labels


def test_our_own_stale_keys_are_removed_but_only_when_the_annotation_lists_them() -> None:
    stale = conventions.config_name("deleted-pool", DIGEST)
    config = ConfigState(
        device_plugin={stale: HANDWRITTEN_CONFIG, HANDWRITTEN: HANDWRITTEN_CONFIG},
        device_plugin_managed=frozenset({stale}),
    )
    result = run([], [], config)
    assert stale not in result.device_plugin
    assert result.device_plugin[HANDWRITTEN] == HANDWRITTEN_CONFIG


def test_a_pool_whose_key_is_taken_by_someone_else_is_set_aside_and_the_key_kept() -> None:
    taken = device_plugin_key("handwritten", {"accelerator": "H100"})
    config = ConfigState(device_plugin={taken: HANDWRITTEN_CONFIG}, device_plugin_managed=frozenset({"default"}))
    result = run(
        [pool("handwritten", {"accelerator": "H100"}), pool("other", {"accelerator": "H100"})],
        [node("n1"), node("n2")],
        config,
    )
    assert conditions(result, "handwritten")["Valid"] == ("False", "PlanningFailed")
    assert "will not overwrite" in result.unplannable["handwritten"]
    assert result.device_plugin[taken] == HANDWRITTEN_CONFIG
    assert taken not in result.device_plugin_managed
    assert members(result, "other") == ["n1"]
    assert all(c.labels.get(conventions.DEVICE_PLUGIN_CONFIG_LABEL) != taken for c in result.changes.values())


def test_the_pool_names_that_collided_get_different_keys() -> None:
    long_name = "a" * 60
    crafted = conventions.config_name(long_name, DIGEST)[len("accelpool-") : -9]  # the hashed form, as a pool name
    assert len(crafted) <= 63
    assert conventions.config_name(long_name, DIGEST) != conventions.config_name(crafted, DIGEST)
    result = run(
        [
            pool(long_name, {"accelerator": "L4", "sharing": {"timeSlicing": {"replicas": 4}}}),
            pool(crafted, {"accelerator": "L4"}),
        ],
        [node("l1", "L4", 1), node("l2", "L4", 1)],
    )
    long_key = device_plugin_key(long_name, {"accelerator": "L4", "sharing": {"timeSlicing": {"replicas": 4}}})
    crafted_key = device_plugin_key(crafted, {"accelerator": "L4"})
    assert {long_key, crafted_key} <= set(result.device_plugin_managed)
    assert "timeSlicing" in result.device_plugin[long_key]
    assert "timeSlicing" not in result.device_plugin[crafted_key]


pool_names = st.from_regex(r"\A[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?\Z").filter(
    lambda n: ".." not in n and ".-" not in n and "-." not in n
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(pool_names, min_size=2, max_size=20, unique=True))
def test_generated_names_are_unique_valid_label_values_and_dns_names(names: list[str]) -> None:
    for make in (_config_name, conventions.agent_name, conventions.nodepool_name):
        made = [make(n) for n in names]
        assert len(set(made)) == len(names)
        for value in made:
            assert conventions.is_label_value(value) and DNS_SUBDOMAIN.match(value), value


def test_a_name_that_looks_like_a_hashed_one_cannot_take_its_place() -> None:
    long_name = "b" * 63
    hashed = conventions.config_name(long_name, DIGEST)
    assert len(hashed) == 63
    impostor = hashed[len("accelpool-") : -9]
    assert len("accelpool-" + impostor) == 54
    assert conventions.config_name(impostor, DIGEST) != hashed, "a full name of 54 characters is hashed too"


def _config_name(pool_name: str) -> str:
    return conventions.config_name(pool_name, DIGEST)
