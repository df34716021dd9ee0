"""Malformed and hostile files given to `accelpool validate -f` and `accelpool plan -f/--nodes`.

Each must give exit 2 and one `error: FILE:...` line per problem naming the place (line and
column, or document and field path), never a traceback; YAML bombs are refused under a memory
limit set in a subprocess, so a regression shows as a crash there rather than here.
"""

from __future__ import annotations

import io
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from accelpool import cli
from accelpool_core import textio

from .conftest import LOCAL_FIXTURE

POOL_HEAD = "apiVersion: accelpool.io/v1alpha1\nkind: ComputePool\n"
GOOD_POOL = POOL_HEAD + "metadata: {name: p}\nspec: {accelerator: H100:8, nodes: 1}\n"


def laughs(levels: int = 8, where: str = "  accelerator") -> str:
    """The "billion laughs": 9**levels strings from a few hundred bytes of anchors and aliases."""
    lines = ["  x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"  x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + f"\n{where}: *a{levels}\n"


@dataclass(frozen=True)
class Hostile:
    id: str
    text: str
    says: str
    """What the error line must contain after `FILE`."""
    nodes: bool = False
    """Given as the --nodes snapshot of `plan` (and not to `validate`)."""


def node_yaml(extra: str) -> str:
    return f"apiVersion: v1\nkind: Node\n{extra}"


CASES = [
    Hostile("yaml-syntax", "spec: [unclosed\n", ":2:1: not valid YAML: while parsing a flow sequence"),
    Hostile("undefined-alias", POOL_HEAD + "metadata: {name: *nowhere}\n", ":3:18: alias *nowhere refers to no anchor"),
    Hostile(
        "recursive-alias",
        POOL_HEAD + "metadata: {name: p}\nspec: &a {nodes: [*a]}\n",
        ":4:19: alias *a refers to a node",
    ),
    Hostile("deep-nesting", POOL_HEAD + "spec: " + "[" * 150 + "]" * 150 + "\n", ":3:106: nested more than 100 deep"),
    Hostile(
        "deep-through-aliases",
        POOL_HEAD
        + "x: &d "
        + "[" * 60
        + "]" * 60
        + "\nspec: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[*d]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n",
        "alias *d nests more than 100 deep",
    ),
    # go-yaml v2 ignores the tags of collections (decode.go `mapping`, `sequence`): a list, never code
    Hostile(
        "python-tag",
        POOL_HEAD + "spec: !!python/object/apply:os.system [echo]\n",
        '(ComputePool/?): spec: must be a mapping, got a list (value: ["echo"])',
    ),
    Hostile("omap-tag", POOL_HEAD + "spec: !!omap [a: 1]\n", "(ComputePool/?): spec: must be a mapping, got a list"),
    Hostile("infinity", POOL_HEAD + "spec: {nodes: .inf}\n", ":3:15: spec.nodes: .inf cannot be sent as JSON"),
    Hostile(
        "null-key", POOL_HEAD + "spec: {~: 1}\n", ":3:8: spec: the key ~ is null, which kubectl cannot make a JSON key"
    ),
    Hostile("tag-mismatch", POOL_HEAD + "spec: {nodes: !!int two}\n", ":3:15: spec.nodes: cannot decode !!str `two`"),
    Hostile("control-character", "kind: ComputePool\x00\n", ":1:18: not valid YAML: character U+0000"),
    Hostile(
        "list-items-not-a-list", "apiVersion: v1\nkind: List\nitems: 5\n", ":1: document 1 (List/?): items: the items"
    ),
    Hostile("document-is-a-scalar", GOOD_POOL + "---\njust text\n", ":6: document 2 (?/?): (document): expected a"),
    Hostile(
        "list-item-is-a-list", "kind: List\nitems:\n- [1, 2]\n", ":3: document 1, items[0] (?/?): (document): expected"
    ),
    Hostile(
        "metadata-not-a-mapping",
        POOL_HEAD + "metadata: [1]\nspec: {}\n",
        "(ComputePool/?): metadata: must be a mapping",
    ),
    Hostile("name-not-a-string", POOL_HEAD + "metadata: {name: [p]}\nspec: {}\n", "metadata.name: must be a string"),
    Hostile(
        "labels-not-a-mapping", POOL_HEAD + "metadata: {name: p, labels: [a]}\nspec: {}\n", "metadata.labels: must be a"
    ),
    Hostile(
        "label-value-a-number",
        POOL_HEAD + "metadata: {name: p, labels: {gpus: 8}}\nspec: {}\n",
        "labels[gpus]: must be a string (quote it)",
    ),
    Hostile(
        "annotations-a-string",
        POOL_HEAD + "metadata: {name: p, annotations: x}\nspec: {}\n",
        "metadata.annotations: must be",
    ),
    Hostile(
        "spec-not-a-mapping",
        POOL_HEAD + "metadata: {name: p}\nspec: [H100]\n",
        "(ComputePool/p): spec: must be a mapping",
    ),
    Hostile("status-not-a-mapping", GOOD_POOL + "status: Ready\n", "(ComputePool/p): status: must be a mapping"),
    Hostile("kind-not-a-string", "kind: [ComputePool]\nmetadata: {name: p}\n", "(?/p): kind: must be a string"),
    Hostile("node-metadata-a-number", node_yaml("metadata: 5\n"), "(Node/?): metadata: must be a mapping", nodes=True),
    Hostile(
        "node-without-name", node_yaml("metadata: {labels: {a: b}}\n"), "metadata.name: a Node needs a name", nodes=True
    ),
    Hostile(
        "node-labels-a-list",
        node_yaml("metadata: {name: gpu-1, labels: [1]}\n"),
        "(Node/gpu-1): metadata.labels",
        nodes=True,
    ),
    Hostile(
        "node-taints-not-a-list",
        node_yaml("metadata: {name: gpu-1}\nspec: {taints: 5}\n"),
        "spec.taints: must be a list",
        nodes=True,
    ),
    Hostile(
        "node-taint-a-string",
        node_yaml("metadata: {name: gpu-1}\nspec: {taints: [x]}\n"),
        "spec.taints[0]: must be a",
        nodes=True,
    ),
    Hostile(
        "node-taint-key-a-list",
        node_yaml("metadata: {name: gpu-1}\nspec: {taints: [{key: [a], effect: NoSchedule}]}\n"),
        "spec.taints[0].key: must be a string",
        nodes=True,
    ),
    Hostile(
        "node-conditions-a-number",
        node_yaml("metadata: {name: gpu-1}\nstatus: {conditions: 5}\n"),
        "status.conditions:",
        nodes=True,
    ),
    Hostile(
        "node-condition-type-a-list",
        node_yaml("metadata: {name: gpu-1}\nstatus: {conditions: [{type: [Ready], status: 'True'}]}\n"),
        "status.conditions[0].type: must be a string",
        nodes=True,
    ),
    Hostile(
        "node-capacity-a-list",
        node_yaml("metadata: {name: gpu-1}\nstatus: {capacity: [8]}\n"),
        "status.capacity: must be",
        nodes=True,
    ),
    Hostile(
        "node-quantity-a-mapping",
        node_yaml("metadata: {name: gpu-1}\nstatus: {allocatable: {nvidia.com/gpu: {n: 8}}}\n"),
        "status.allocatable[nvidia.com/gpu]: must be a quantity",
        nodes=True,
    ),
    Hostile(
        "node-list-items-a-mapping", "apiVersion: v1\nkind: NodeList\nitems: {a: 1}\n", "items: the items", nodes=True
    ),
]


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = cli.main(args)
    err = capsys.readouterr().err
    return code, [line for line in err.splitlines() if line.startswith("error: ")]


@pytest.mark.parametrize("case", [c for c in CASES if not c.nodes], ids=lambda c: c.id)
def test_validate_names_the_file_and_place(case: Hostile, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "input.yaml"
    path.write_text(case.text)
    code, errors = run_cli(["validate", "-f", str(path)], capsys)
    assert code == 2
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"error: {path}:") and case.says in errors[0], errors


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_plan_refuses_without_a_plan(case: Hostile, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "input.yaml"
    path.write_text(case.text)
    pools, nodes = (tmp_path / "pools.yaml", path) if case.nodes else (path, LOCAL_FIXTURE)
    if case.nodes:
        pools.write_text(GOOD_POOL)
    code = cli.main(["plan", "-f", str(pools), "--nodes", str(nodes), "--now", "2026-11-02T12:00:00Z"])
    out, err = capsys.readouterr()
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert code == 2
    assert out == ""
    assert len(errors) == 1, err
    assert errors[0].startswith(f"error: {path}:") and case.says in errors[0], errors


def test_every_problem_of_every_file_gets_its_own_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(POOL_HEAD + "metadata: {name: p, labels: {a: 1, b: [2]}}\nspec: []\n---\n" + GOOD_POOL)
    unparsable = tmp_path / "unparsable.yaml"
    unparsable.write_text("a: [\n")
    code, errors = run_cli(["validate", "-f", str(broken), "-f", str(unparsable)], capsys)
    assert code == 2
    assert [e.split(": ", 3)[2] for e in errors[:3]] == ["document 1 (ComputePool/p)"] * 3
    assert {e.split(": ")[3] for e in errors[:3]} == {"spec", "metadata.labels[a]", "metadata.labels[b]"}
    assert errors[3].startswith(f"error: {unparsable}:2:1: not valid YAML")
    assert len(errors) == 4


def test_the_readable_objects_are_still_validated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pools.yaml"
    path.write_text(GOOD_POOL + "---\n" + POOL_HEAD + "metadata: 7\n")
    assert cli.main(["validate", "-f", str(path)]) == 2
    out, err = capsys.readouterr()
    assert "ComputePool/p: valid" in out
    assert "1 valid, 0 invalid, 1 input errors" in err


def test_huge_values_are_shown_briefly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pools.yaml"
    path.write_text(POOL_HEAD + "metadata: {name: p, labels: {a: [" + ", ".join(["x" * 100] * 5000) + "]}}\n")
    code, errors = run_cli(["validate", "-f", str(path)], capsys)
    assert code == 2
    assert len(errors) == 1
    assert len(errors[0]) <= len("error: ") + textio.LINE_CHARS
    assert '(value: ["xxxxxxxx' in errors[0] and errors[0].endswith("…)")


def test_control_characters_in_values_are_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pools.yaml"
    path.write_text(POOL_HEAD + 'metadata: {name: p, labels: {"\\e[31m\\nkey": 1}}\n')
    code, errors = run_cli(["validate", "-f", str(path)], capsys)
    assert code == 2
    assert "labels[\\x1b[31m\\nkey]" in errors[0]


def test_files_over_the_size_limit_are_not_parsed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(GOOD_POOL + "#" * textio.MAX_SOURCE_BYTES)
    code, errors = run_cli(["validate", "-f", str(path)], capsys)
    assert code == 2
    assert errors == [f"error: {path}: larger than {textio.MAX_SOURCE_BYTES // 2**20} MiB, the limit for one input"]


def test_files_that_are_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(GOOD_POOL.encode() + b"# caf\xe9\n")
    code, errors = run_cli(["validate", "-f", str(path)], capsys)
    assert code == 2
    assert errors == [f"error: {path}: byte {len(GOOD_POOL) + 5}: not UTF-8 text"]


def test_standard_input_is_named(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("kind: [\n"))
    code, errors = run_cli(["validate", "-f", "-"], capsys)
    assert code == 2
    assert errors[0].startswith("error: <stdin>:2:1: not valid YAML")


def test_json_values_from_yaml_are_read_as_kubernetes_reads_them(tmp_path: Path) -> None:
    """Keys are strings, timestamps stay text, !!binary is decoded, !!set is a mapping (sigs.k8s.io/yaml's
    reading, through go-yaml v2)."""
    path = tmp_path / "object.yaml"
    path.write_text("8: a\non: b\nt: 2026-11-01T00:00:00Z\nbin: !!binary aGk=\nset: !!set {x}\n")
    found = textio.read_objects([str(path)])
    assert found.errors == []
    assert found.objects[0].body == {
        "8": "a",
        "true": "b",
        "t": "2026-11-01T00:00:00Z",
        "bin": "hi",
        "set": {"x": None},
    }


def test_a_list_keeps_the_line_of_each_item(tmp_path: Path) -> None:
    path = tmp_path / "nodes.yaml"
    path.write_text("apiVersion: v1\nkind: NodeList\nitems:\n- metadata: {name: a}\n-\n  metadata: {name: b}\n")
    found = textio.read_objects([str(path)])
    assert [(o.place, o.label) for o in found.objects] == [
        (f"{path}:4: document 1, items[0]", "?/a"),
        (f"{path}:6: document 1, items[1]", "?/b"),
    ]


def test_ordinary_anchors_and_merge_keys_still_work(tmp_path: Path) -> None:
    path = tmp_path / "pools.yaml"
    path.write_text(
        "base: &base {apiVersion: accelpool.io/v1alpha1, kind: ComputePool}\n"
        "pool:\n  <<: *base\n  metadata: {name: a}\n  spec: {accelerator: H100:8, nodes: 1}\n"
    )
    found = textio.read_objects([str(path)])
    assert found.errors == []
    assert found.objects[0].body["pool"]["kind"] == "ComputePool"


def test_yaml_timestamps_are_text_as_kubernetes_reads_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An unquoted date is a string, with no calendar check (2026-13-45 used to end in a traceback)."""
    pools = tmp_path / "pools.yaml"
    pools.write_text(
        POOL_HEAD + "metadata: {name: p, creationTimestamp: 2026-13-45}\nspec: {accelerator: H100:8, nodes: 1}\n"
    )
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(
        "kind: Node\nmetadata: {name: gpu-1, labels: {since: 2026-13-45}, creationTimestamp: 2026-11-01}\n"
    )
    assert cli.main(["plan", "-f", str(pools), "--nodes", str(nodes), "-o", "json"]) == 0
    assert cli.main(["validate", "-f", str(pools)]) == 0
    capsys.readouterr()


# ---------------------------------------------------------------- bombs, under a memory limit


MEMORY_LIMIT = 1024 * 2**20


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_CPU, (60, 60))


BOMBS = {
    "laughs-in-a-spec": POOL_HEAD + "metadata: {name: bomb}\nspec:\n  nodes: 1\n" + laughs(),
    "laughs-in-a-name": POOL_HEAD + "metadata:\n" + laughs(where="  name"),
    "merge-keys": "m0: &m0 {k0: 1, k1: 1, k2: 1, k3: 1, k4: 1, k5: 1, k6: 1, k7: 1, k8: 1}\n"
    + "".join(f"m{i}: &m{i} {{<<: [{', '.join([f'*m{i - 1}'] * 9)}]}}\n" for i in range(1, 9)),
    "many-small-documents": "---\n".join(POOL_HEAD + "metadata: {name: p}\nspec:\n" + laughs(4) for _ in range(100)),
}


@pytest.mark.parametrize("command", ["validate", "validate-json", "plan", "plan-nodes"])
@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_alias_bombs_are_refused_within_a_memory_limit(bomb: str, command: str, tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMBS[bomb])
    assert len(BOMBS[bomb]) < 50_000
    args = {
        "validate": ["validate", "-f", str(path)],
        "validate-json": ["validate", "-o", "json", "-f", str(path)],
        "plan": ["plan", "-f", str(path), "--nodes", str(LOCAL_FIXTURE)],
        "plan-nodes": ["plan", "-f", str(path), "--nodes", str(path)],
    }[command]
    done = subprocess.run(
        [sys.executable, "-m", "accelpool.cli", *args],
        capture_output=True,
        text=True,
        preexec_fn=_limits,
        timeout=300,
        check=False,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert errors, done.stderr[-2000:]
    assert all(e.startswith(f"error: {path}:") and "excessive aliasing" in e for e in errors), errors
    assert "Traceback" not in done.stderr
