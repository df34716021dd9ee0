"""examples/ are valid ComputePools; each file in examples/invalid/ is rejected with the words its
`# expect:` comment quotes: what `kubectl apply` prints, and what `accelpool validate` reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelpool_api.validation import validate_object
from accelpool_core.textio import read_objects

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def expected_rejection(path: Path) -> str:
    """The `# expect:` comment, its continuation lines (`#   `) joined with newlines."""
    lines = path.read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("# expect: ")), None)
    assert start is not None, f"{path.name} must quote the error it gets (# expect: ...)"
    quoted = [lines[start].removeprefix("# expect: ")]
    quoted += [line.removeprefix("#   ") for line in lines[start + 1 :] if line.startswith("#   ")]
    return _trimmed("\n".join(quoted))


def _trimmed(text: str) -> str:
    """kubectl ends `is invalid: ` with a space before a list; a comment line need not keep it."""
    return "\n".join(line.rstrip() for line in text.splitlines())


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("**/*.yaml")), ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_example(path: Path) -> None:
    found = read_objects([str(path)])
    assert found.errors == []
    verdicts = [validate_object(o.body) for o in found.objects]
    if path.parent.name == "invalid":
        assert len(verdicts) == 1 and not verdicts[0].valid
        assert _trimmed(verdicts[0].rejection) == expected_rejection(path)
    else:
        assert verdicts and all(v.valid for v in verdicts), [str(p) for v in verdicts for p in v.problems]


def test_examples_cover_the_promised_accelerators() -> None:
    text = " ".join(p.read_text() for p in EXAMPLES.glob("*.yaml"))
    for name in ("H100", "A100", "L4", "MI300X", "Trainium2", "TPU-v5p", "profiles:", "timeSlicing"):
        assert name in text, name
