"""Plain-text input and output shared by the commands: YAML sources named on the command line,
and column-aligned tables. Used by `accelpool validate`, `plan`, `catalog` and `demo`.

`read_objects` is the one reader of the YAML files the commands are given, and it treats them
as untrusted. It returns the Kubernetes objects found (a `kind: ...List` is unpacked into its
items) and, for input it cannot read, one line per problem: `FILE:LINE:COL: message` for YAML
that does not parse, `FILE:LINE: document N: field: message (value: ...)` for a document of the
wrong shape. It keeps time and memory proportional to the size of the input:

- a file (or standard input) larger than `MAX_SOURCE_BYTES` is refused before it is parsed;
- nesting deeper than `MAX_DEPTH`, counting what aliases expand to, is refused;
- an alias inside the node it refers to (`a: &a [*a]`) is refused: it has no finite expansion;
- aliases that expand to more than their share of the data are refused, with the rule that
  Kubernetes' own YAML decoder applies (sigs.k8s.io/yaml → go-yaml v3 `decode.go`,
  `allowedAliasRatio`, "document contains excessive aliasing"): up to 99% of the decoded nodes
  may come from aliases while the total stays under 400,000, falling linearly to 10% at
  4,000,000. Counted over a whole file, so many small documents cannot add up to a bomb. A
  "billion laughs" file of a few hundred bytes is refused while it is being parsed, before
  anything is expanded;
- values are read as JSON would carry them, as Kubernetes reads YAML: every mapping key is a
  string (`8: x` → `"8"`, `on: x` → `"true"`), timestamps and `!!binary` stay strings, a
  `!!set` is a mapping; `!!omap`, `!!pairs` and every non-standard tag are refused.

`brief(value)` shows a value in an error line in at most `VALUE_CHARS` characters, reading no
more of it than it shows; `one_line(text)` bounds and sanitises any line built from input.

The modules: `sources` (the files and the objects in them), `safe_yaml` (the limits and the
JSON-shaped loader), `lines` (bounded text for error lines, and tables).
"""

from accelpool.textio.lines import LINE_CHARS, VALUE_CHARS, brief, format_table, one_line
from accelpool.textio.safe_yaml import MAX_DEPTH, SourceError
from accelpool.textio.sources import (
    MAX_SOURCE_BYTES,
    Objects,
    SourceObject,
    add_filename_argument,
    read_objects,
    read_sources,
)

__all__ = [
    "LINE_CHARS",
    "MAX_DEPTH",
    "MAX_SOURCE_BYTES",
    "VALUE_CHARS",
    "Objects",
    "SourceError",
    "SourceObject",
    "add_filename_argument",
    "brief",
    "format_table",
    "one_line",
    "read_objects",
    "read_sources",
]
