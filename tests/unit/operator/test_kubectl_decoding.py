"""Files read as kubectl reads them: YAML scalars resolved by go-yaml v2, keys and values made JSON
by sigs.k8s.io/yaml, JSON streams read as JSON.

The tables follow the real code (cited per row group): go.yaml.in/yaml/v2 v2.4.2 (the go-yaml v2
branch) `resolve.go` and `decode.go`, sigs.k8s.io/yaml `yaml.go` (`convertToJSONableObject`, then
Go's `encoding/json`), k8s.io/apimachinery pkg/util/yaml/decoder.go (`YAMLOrJSONDecoder`).
"""

from __future__ import annotations

import json
import math
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from accelpool import cli
from accelpool_api import validation
from accelpool_core import textio
from accelpool_core.textio import goyaml, json_stream
from tests.support.builders import node_body

POOL_HEAD = "apiVersion: accelpool.io/v1alpha1\nkind: ComputePool\nmetadata: {name: p}\n"

# ---------------------------------------------------------------- plain scalars as values

SCALARS: list[tuple[str, Any]] = [
    # no sexagesimal numbers (resolve.go: "Base 60 floats are a bad idea ... purposefully unsupported")
    ("1:30", "1:30"),
    ("190:20:30", "190:20:30"),
    # resolveMapList: booleans, null, the special floats; nothing else is in the map
    *((text, True) for text in ("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON")),
    *((text, False) for text in ("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF")),
    *((text, None) for text in ("", "~", "null", "Null", "NULL")),
    ("YeS", "YeS"),
    ("nO", "nO"),
    ("nil", "nil"),
    ("NaN", "NaN"),
    ("inf", "inf"),
    ("<<", "<<"),
    # a leading '.': strconv.ParseFloat
    (".5", 0.5),
    (".5e1", 5),
    (".e1", ".e1"),
    (".5_5", 0.55),  # ParseFloat takes an underscore between digits
    ("._5", "._5"),
    # a leading sign or digit: ParseInt(s, 0, 64) with '_' removed, then ParseUint, then yamlStyleFloat
    ("12", 12),
    ("+12", 12),
    ("-12", -12),
    ("1_000", 1000),
    ("1__0", 10),
    ("_1", "_1"),
    ("0x1F", 31),
    ("0X1f", 31),
    ("-0x1F", -31),
    ("0o10", 8),
    ("0O10", 8),
    ("010", 8),  # a bare leading zero is octal in Go's base 0
    ("08", 8),  # not octal: a float, 8.0, which JSON writes as 8
    ("0b101", 5),
    ("-0b101", -5),
    ("0b-101", -5),  # resolve.go's own "0b" branch, after ParseInt gave up
    ("0x", "0x"),
    ("+", "+"),
    ("-0", 0),
    ("9223372036854775807", 2**63 - 1),
    ("18446744073709551615", 2**64 - 1),  # uint64
    ("5e-1", 0.5),
    ("1e1", 10),  # float64 10, written 10: an integer to the API server
    ("1E+2", 100),
    ("1.", 1),
    ("+.5", 0.5),
    ("1.5", 1.5),
    ("-0.0", 0),
    ("1e20", 10**20),
    ("1e21", 1e21),  # encoding/json switches to exponent form at 1e21: a float again
    ("18446744073709551616", 18446744073709552000),  # past uint64: a float, its shortest digits
    ("1e999", "1e999"),  # ParseFloat's range error: a string
    ("9" * 5000, "9" * 5000),
    # timestamps stay text in an interface{} (decode.go `scalar`), valid or not
    ("2001-12-14", "2001-12-14"),
    ("2001-12-14T21:59:43.10Z", "2001-12-14T21:59:43.10Z"),
    ("2026-13-45", "2026-13-45"),
]


@pytest.mark.parametrize(("text", "value"), SCALARS, ids=[t[:20] or "(empty)" for t, _ in SCALARS])
def test_plain_scalars_resolve_as_go_yaml_v2_resolves_them(text: str, value: Any) -> None:
    got = textio.load_yaml(f"v: {text}\n")[0]["v"]
    assert got == value and type(got) is type(value)


TAGGED: list[tuple[str, Any]] = [
    ("'1:30'", "1:30"),  # quoted: a string (decode.go `scalar`: no tag and not implicit)
    ('"y"', "y"),
    ("! 12", "12"),  # the non-specific tag: not resolvable, so the text
    ('! "12"', "12"),
    ("!foo 12", "12"),  # an unknown tag is ignored
    ("!!str 12", "12"),
    ('!!int "12"', 12),  # an explicit standard tag resolves the text
    ("!!float 1", 1),  # !!float takes an integer (float64(1), written 1)
    ("!!bool yes", True),
    ("!!null ~", None),
    ("!!timestamp 2001-12-14", "2001-12-14"),
    ("!!binary aGk=", "hi"),  # base64, decoded
    ("!!binary /w==", "\ufffd"),  # not UTF-8: encoding/json writes U+FFFD
    ("!!python/object/apply:os.system [echo]", ["echo"]),  # collections' tags are ignored
    ("!!omap [a: 1]", [{"a": 1}]),
]


@pytest.mark.parametrize(("text", "value"), TAGGED, ids=[t for t, _ in TAGGED])
def test_quoted_and_tagged_scalars(text: str, value: Any) -> None:
    assert textio.load_yaml(f"v: {text}\n")[0]["v"] == value


REFUSED: list[tuple[str, str]] = [
    # encoding/json cannot write them: "json: unsupported value: +Inf"
    ("v: .inf\n", "1:4: v: .inf cannot be sent as JSON, so kubectl refuses the file (json: unsupported value: +Inf)"),
    ("v: [-.Inf]\n", "v[0]: -.Inf cannot be sent as JSON, so kubectl refuses the file (json: unsupported value: -Inf)"),
    ("v: {w: .NaN}\n", "v.w: .NaN cannot be sent as JSON"),
    # resolve.go: an explicit tag the text does not fit
    ("v: !!int foo\n", "v: cannot decode !!str `foo` as a !!int (kubectl refuses the file)"),
    ("v: !!float 18446744073709551615\n", "cannot decode !!int `18446744073709551615` as a !!float"),
    ("v: !!null x\n", "cannot decode !!str `x` as a !!null"),
    ("v: !!timestamp 2001-13-01\n", "cannot decode !!str `2001-13-01` as a !!timestamp"),
    ("v: !!binary 'not base64'\n", "v: !!binary value contains invalid base64 data"),
    # convertToJSONableObject: "unsupported map key of type"
    ("~: x\n", "(document): the key ~ is null, which kubectl cannot make a JSON key"),
    ("v: {null: x}\n", "v: the key null is null"),
    ("18446744073709551615: x\n", "is beyond int64, which kubectl cannot make a JSON key"),
    # decode.go `mapping`: "invalid map key"; `merge`: "map merge requires map or sequence of maps"
    ("? [a]\n: x\n", "a mapping or a list cannot be a mapping key"),
    ("v: {<<: 5}\n", "v.<<: map merge requires map or sequence of maps as the value"),
    ("v: {<<: [{a: 1}, 2]}\n", "map merge requires map or sequence of maps"),
]


@pytest.mark.parametrize(("text", "says"), REFUSED, ids=[t.strip() for t, _ in REFUSED])
def test_what_kubectl_refuses_is_refused_with_the_place(text: str, says: str) -> None:
    with pytest.raises(textio.SourceError) as refused:
        textio.load_yaml(text, "f.yaml")
    assert str(refused.value).startswith("f.yaml:") and says in str(refused.value)


def test_dump_quotes_every_string_kubectl_would_read_as_something_else() -> None:
    """PyYAML's dumper writes `y`, `1e1` or `0o10` bare: kubectl would send a bool or a number."""
    strings = {text: text for text, _ in SCALARS}
    assert textio.load_yaml(textio.dump_yaml(strings)) == [strings]


# ---------------------------------------------------------------- keys

KEYS: list[tuple[str, str]] = [
    # convertToJSONableObject: int → strconv.Itoa, bool → "true"/"false",
    # float64 → strconv.FormatFloat(f, 'g', -1, 32) with .inf/-.inf/.nan
    ("8", "8"),
    ("0x10", "16"),
    ("y", "true"),
    ("off", "false"),
    ("'on'", "on"),
    ("1.0", "1"),
    ("0.1", "0.1"),
    ("1e6", "1e+06"),
    ("123456.0", "123456"),
    ("1234567.0", "1.234567e+06"),
    ("0.0001", "0.0001"),
    ("0.00001", "1e-05"),
    ("3.14159265358979", "3.1415927"),  # float32 precision
    ("16777217.0", "1.6777216e+07"),
    ("1e39", ".inf"),  # beyond float32
    (".inf", ".inf"),
    ("-.inf", "-.inf"),
    (".nan", ".nan"),
    ("-0.0", "-0"),
    ("2001-12-14", "2001-12-14"),
    ("!!binary aGk=", "hi"),
]


@pytest.mark.parametrize(("text", "key"), KEYS, ids=[t for t, _ in KEYS])
def test_keys_become_strings_as_sigs_k8s_io_yaml_makes_them(text: str, key: str) -> None:
    assert textio.load_yaml(f"{text}: v\n")[0] == {key: "v"}


def test_float32_key_formatting_is_the_shortest_round_trip() -> None:
    """FormatFloat(f, 'g', -1, 32): the shortest digits that read back as the same float32."""
    for value in (0.1, 0.3, 1 / 3, 2.5e-45, 3.4028235e38, 1e-38, 123.456, 7e-5):
        text = goyaml.format_float32(value)
        assert _float32(float(text)) == _float32(value), (value, text)
        digits = text.split("e")[0].replace(".", "").replace("-", "").strip("0")
        if len(digits) > 1:
            shorter = f"{float(text):.{len(digits) - 2}e}"
            assert _float32(float(shorter)) != _float32(value), (value, text, shorter)


def _float32(value: float) -> float:
    import struct

    return float(struct.unpack("<f", struct.pack("<f", value))[0])


# ---------------------------------------------------------------- merges, aliases


def test_merge_keys_land_where_they_stand() -> None:
    """decode.go `mapping`/`merge`: the merged keys are set at the `<<`'s place, so a key before it is
    overridden and a key after it wins; of a list of maps, the earlier wins."""
    text = "a: &a {p: 1, q: 1}\nb: &b {p: 2, r: 2}\nm: {p: 0, <<: *a, q: 9}\nl: {<<: [*a, *b]}\n"
    document = textio.load_yaml(text)[0]
    assert document["m"] == {"p": 1, "q": 9}
    assert document["l"] == {"p": 1, "q": 1, "r": 2}


def test_quoted_and_aliased_merge_keys_are_plain_keys() -> None:
    """isMerge: a plain `<<` or one tagged !!merge; a quoted one, or an alias to one, is a key."""
    document = textio.load_yaml("k: &k <<\nm: {'<<': {a: 1}, !!merge <<: {b: 2}}\nl: {*k : 1}\n")[0]
    assert document["m"] == {"<<": {"a": 1}, "b": 2}
    assert document["l"] == {"<<": 1}


def test_an_alias_to_a_scalar_keeps_its_go_type_as_a_key() -> None:
    assert textio.load_yaml("a: &f 1e1\nb: {*f : x}\n")[0] == {"a": 10, "b": {"10": "x"}}


# ---------------------------------------------------------------- the commands, end to end


def _validate(tmp_path: Path, spec: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    path = tmp_path / "pool.yaml"
    path.write_text(POOL_HEAD + f"spec:\n  accelerator: H100:8\n{spec}")
    code = cli.main(["validate", "-f", str(path)])
    return code, capsys.readouterr().out


def test_validate_reads_1_30_as_the_string_kubectl_sends(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """YAML 1.1 (and PyYAML) read `1:30` as 90; go-yaml, and so kubectl, send the string "1:30"."""
    code, out = _validate(tmp_path, "  nodes: 1:30\n", capsys)
    assert code == 1
    assert 'spec.nodes: Invalid value: "string": spec.nodes in body must be of type integer: "string"' in out
    assert ".spec.nodes accessor error: 1:30 is of the type string, expected int64" in out


@pytest.mark.parametrize(
    ("spec", "field", "value"),
    [
        ("  dedicated: y\n", "dedicated", True),
        ("  dedicated: n\n", "dedicated", False),
        ("  dedicated: off\n", "dedicated", False),
        ("  nodes: 5e0\n", "nodes", 5),
        ("  nodes: 1e1\n", "nodes", 10),
        ("  nodes: 0o10\n", "nodes", 8),
        ("  nodes: 0x10\n", "nodes", 16),
        ("  nodes: 1_000\n", "nodes", 1000),
    ],
)
def test_what_kubectl_sends_as_a_bool_or_number_is_one(
    spec: str, field: str, value: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _validate(tmp_path, spec, capsys)
    assert code == 0, out
    found = textio.read_objects([str(tmp_path / "pool.yaml")])
    verdict = validation.validate_object(found.objects[0].body)
    assert verdict.pool is not None
    assert getattr(verdict.pool.spec, field) == value


def test_a_fraction_kubectl_sends_as_a_number_is_not_an_integer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _validate(tmp_path, "  nodes: 5e-1\n", capsys)
    assert code == 1
    assert 'spec.nodes in body must be of type integer: "number"' in out


def test_plan_does_not_plan_90_nodes_for_1_30(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pools = tmp_path / "pools.yaml"
    pools.write_text(POOL_HEAD + "spec: {accelerator: H100:8, nodes: 1:30}\n")
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps({"apiVersion": "v1", "items": [], "kind": "List"}))
    assert cli.main(["plan", "-f", str(pools), "--nodes", str(nodes), "-o", "json"]) == 0
    out, err = capsys.readouterr()
    (pool,) = json.loads(out)["pools"]
    assert pool["phase"] == "Failed" and pool["members"] == []
    assert "invalid pools" in err


# ---------------------------------------------------------------- JSON streams


def _objects(tmp_path: Path, text: str, name: str = "in.json") -> tuple[list[Any], list[str]]:
    path = tmp_path / name
    path.write_text(text)
    found = textio.read_objects([str(path)])
    return [o.body for o in found.objects], [e.replace(str(path), "F") for e in found.errors]


def test_a_stream_that_starts_with_a_brace_is_json(tmp_path: Path) -> None:
    """JSON numbers are JSON's (`1e1` is a float to the API server), documents may follow each other."""
    assert _objects(tmp_path, '{"a": 1e1, "b": "y"}\n{"c": 18446744073709551616}') == (
        [{"a": 10.0, "b": "y"}, {"c": 2**64}],
        [],
    )


def test_a_stream_whose_first_value_is_not_json_is_yaml(tmp_path: Path) -> None:
    """YAMLOrJSONDecoder: the JSON decoder fails on the first object, so the stream is read as YAML."""
    assert _objects(tmp_path, "{a: y, b: 1:30}\n") == ([{"a": True, "b": "1:30"}], [])
    assert _objects(tmp_path, '{"a": NaN}\n') == ([{"a": "NaN"}], [])


def test_json_errors_after_the_first_value_name_the_place(tmp_path: Path) -> None:
    assert _objects(tmp_path, '{"a": 1}\n{"b": [1, }\n') == ([{"a": 1}], ["F:2:11: not valid JSON: Expecting value"])


def test_json_is_read_in_chunks_with_the_same_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    items = [{"metadata": {"name": f"n{i}", "labels": {"x": "é" * i}}, "n": 12345678 + i} for i in range(40)]
    text = json.dumps({"apiVersion": "v1", "items": items, "kind": "List", "metadata": {}}, indent=4)
    monkeypatch.setattr(json_stream, "CHUNK_CHARS", 7)
    path = tmp_path / "nodes.json"
    path.write_text(text)
    streamed = list(textio.scan_objects(str(path)))
    whole = textio.read_objects([str(path)]).objects
    assert [o.body for o in streamed] == [o.body for o in whole] == items  # type: ignore[union-attr]
    lines = text.splitlines()
    starts = [i + 1 for i, line in enumerate(lines) if line == "        {"]
    assert [o.line for o in streamed] == [o.line for o in whole] == starts  # type: ignore[union-attr]


# ---------------------------------------------------------------- large snapshots


def _snapshot(path: Path, nodes: int, dump: Any = json.dumps) -> int:
    """A List of `nodes` Nodes about as large as real ones: their images and managedFields are most of it."""
    items = [
        node_body(
            f"gpu-{i}",
            metadata={
                "managedFields": [{"manager": f"m{j}", "fieldsV1": {f"f:{k}": {} for k in range(40)}} for j in range(3)]
            },
            status={
                "images": [
                    {"names": [f"registry.example.com/team/image-{j}@sha256:{i * 100 + j:064x}"], "sizeBytes": j}
                    for j in range(60)
                ]
            },
        )
        for i in range(nodes)
    ]
    text = dump({"apiVersion": "v1", "items": items, "kind": "List"})
    path.write_text(text)
    return len(text)


def test_plan_reads_a_snapshot_over_the_old_8_mib_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = tmp_path / "nodes.json"
    assert _snapshot(snapshot, 2100) > 20 * 2**20
    pools = tmp_path / "pools.yaml"
    pools.write_text(POOL_HEAD + "spec: {accelerator: H100:8, nodes: 1500}\n")
    assert cli.main(["plan", "-f", str(pools), "--nodes", str(snapshot), "-o", "json"]) == 0
    (pool,) = json.loads(capsys.readouterr().out)["pools"]
    assert len(pool["members"]) == 1500


@pytest.mark.parametrize("form", ["json", "yaml"])
def test_a_snapshot_is_read_a_node_at_a_time(form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The items of a List come out as they are parsed: memory goes with one Node (and one chunk of text),
    not with the fleet."""
    import yaml

    monkeypatch.setattr(json_stream, "CHUNK_CHARS", 2**16)
    snapshot = tmp_path / f"nodes.{form}"
    nodes = 450 if form == "json" else 150
    size = _snapshot(snapshot, nodes, json.dumps if form == "json" else lambda d: yaml.dump(d, Dumper=yaml.CSafeDumper))
    assert size > 2**20
    tracemalloc.start()
    try:
        count = sum(1 for o in textio.scan_objects(str(snapshot)) if isinstance(o, textio.SourceObject))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == nodes
    assert peak < size / 4, f"peak {peak} for {size} bytes"


@pytest.mark.parametrize("command", [["plan"], ["recommend", "8B"]])
def test_an_absurd_snapshot_is_refused_with_the_limit(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`plan --nodes` and `recommend --nodes` read a snapshot the same way, under the snapshot limit."""
    monkeypatch.setattr(textio.sources, "MAX_SNAPSHOT_BYTES", 2**20)
    snapshot = tmp_path / "nodes.json"
    assert _snapshot(snapshot, 150) > 2**20
    pools = tmp_path / "pools.yaml"
    pools.write_text(POOL_HEAD + "spec: {accelerator: H100:8, nodes: 1}\n")
    assert cli.main([*command, "-f", str(pools), "--nodes", str(snapshot)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert f"error: {snapshot}: larger than 1 MiB, the limit for one input" in err


def test_an_absurd_object_in_a_snapshot_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(textio.sources, "MAX_OBJECT_BYTES", 5000)
    snapshot = tmp_path / "nodes.json"
    _snapshot(snapshot, 3)
    found = list(textio.scan_objects(str(snapshot)))
    assert found == [f"{snapshot}:1:32: a JSON value larger than 5000 bytes"]


def test_a_snapshot_document_with_items_that_is_no_list_is_refused(tmp_path: Path) -> None:
    """kubectl writes `items` before `kind`: a Node's items were handed out before its kind said it is none."""
    snapshot = tmp_path / "nodes.json"
    snapshot.write_text('{"items": [{"metadata": {"name": "a"}}], "kind": "Node", "metadata": {"name": "n"}}')
    found = list(textio.scan_objects(str(snapshot)))
    assert found[-1] == (
        f"{snapshot}:1: document 1 (Node/n): items: only a List has items; this document's kind is not one "
        '(value: "Node")'
    )


def test_nan_and_infinity_in_json_are_not_numbers() -> None:
    assert math.isnan(float("nan"))  # Python's json would read NaN; Go's does not, nor does this reader
    chunks = iter(['{"a": Infinity}', ""])
    with pytest.raises(json_stream.NotJson):
        list(json_stream.documents("x", lambda _size: next(chunks), 2**20))
