"""Plain-text input and output shared by the commands: YAML and JSON sources named on the command
line, and column-aligned tables. Used by `accelpool validate`, `plan`, `recommend`, `catalog`
and `demo`, and by the Python API (`ComputePool.from_yaml`, `to_yaml`).

`read_objects` is the one reader of the files the commands are given (`scan_objects` the same,
item by item, for a Node snapshot), and it reads them as kubectl does, treating them as
untrusted. It returns the Kubernetes objects found (a `kind: ...List` is unpacked into its items)
and, for input it cannot read, one line per problem: `FILE:LINE:COL: message` for YAML or JSON that
does not parse or holds a value kubectl would not send, `FILE:LINE: document N: field: message
(value: ...)` for a document of the wrong shape.

Values are what kubectl sends the API server (`goyaml` has the rules, each with its source):

- a stream whose first non-blank character is `{` is JSON, read as JSON, unless its first value
  does not parse: then, as kubectl does, the whole stream is YAML;
- YAML scalars resolve as go-yaml v2 resolves them, not as YAML 1.1 or PyYAML do: `1:30` is a
  string (no sexagesimal numbers), `y`/`n`/`on`/`off` are booleans, `5e-1`, `1e1`, `0o10`, `0x1F`,
  `0b101`, `1_000` and `+12` are numbers, timestamps stay text; a float without a fraction is the
  integer JSON carries (`1e1` → 10); `.inf` and `.nan` cannot be sent (kubectl refuses the file);
- every mapping key is a string, as sigs.k8s.io/yaml makes it (`8: x` → `"8"`, `on: x` →
  `"true"`, `0.1: x` → `"0.1"`); a null key (`~: x`) is refused, as kubectl refuses it;
- `!!binary` is decoded; other tags on collections, and unknown tags, are ignored (go-yaml v2);
  `<<` merges as go-yaml v2 merges: its keys land where it stands, so later keys override them.

It keeps time and memory proportional to the input:

- a file (or standard input) larger than `MAX_SOURCE_BYTES` (`MAX_SNAPSHOT_BYTES` for a
  snapshot, whose objects each stay under `MAX_OBJECT_BYTES` when it is JSON) is refused, a file
  before it is parsed, standard input as soon as it passes the limit; bytes that are not UTF-8
  are refused with their offset;
- nesting deeper than `MAX_DEPTH`, counting what aliases expand to, is refused;
- an alias inside the node it refers to (`a: &a [*a]`) is refused: it has no finite expansion;
- aliases that expand to more than their share of the data are refused, with the rule that
  Kubernetes' own YAML decoder applies (sigs.k8s.io/yaml → go-yaml v2 `decode.go`,
  `allowedAliasRatio`, "document contains excessive aliasing"): up to 99% of the decoded nodes
  may come from aliases while the total stays under 400,000, falling linearly to 10% at
  4,000,000. Counted over a whole file, so many small documents cannot add up to a bomb. A
  "billion laughs" file of a few hundred bytes is refused while it is being parsed, before
  anything is expanded;
- a snapshot's List items are handed out as they are parsed, one at a time (`scan_objects`).

`brief(value)` shows a value in an error line in at most `VALUE_CHARS` characters, reading no
more of it than it shows; `one_line(text)` bounds and sanitises any line built from input;
`load_yaml(text)` reads a YAML text by the same rules (for text that is not a file), and
`dump_yaml(value)` writes YAML that kubectl reads back as `value` (PyYAML's dumper writes the
string "y" bare, which kubectl reads as true).

The modules: `sources` (the files and the objects in them), `safe_yaml` (YAML events → values,
within the limits), `json_stream` (JSON, in chunks), `goyaml` (one scalar, as kubectl reads it),
`lines` (bounded text for error lines, and tables).
"""

from accelpool_core.textio.lines import LINE_CHARS, VALUE_CHARS, brief, format_table, one_line
from accelpool_core.textio.safe_yaml import MAX_DEPTH, SourceError
from accelpool_core.textio.safe_yaml import dump as dump_yaml
from accelpool_core.textio.safe_yaml import load as load_yaml
from accelpool_core.textio.sources import (
    MAX_OBJECT_BYTES,
    MAX_SNAPSHOT_BYTES,
    MAX_SOURCE_BYTES,
    Objects,
    SourceObject,
    add_filename_argument,
    read_objects,
    scan_objects,
)

__all__ = [
    "LINE_CHARS",
    "MAX_DEPTH",
    "MAX_OBJECT_BYTES",
    "MAX_SNAPSHOT_BYTES",
    "MAX_SOURCE_BYTES",
    "VALUE_CHARS",
    "Objects",
    "SourceError",
    "SourceObject",
    "add_filename_argument",
    "brief",
    "dump_yaml",
    "format_table",
    "load_yaml",
    "one_line",
    "read_objects",
    "scan_objects",
]
