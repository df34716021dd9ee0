"""examples/ are valid ComputePools; examples/invalid/ each get the error their comment promises."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelpool.textio import read_objects
from accelpool.validation import validate_object

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("**/*.yaml")), ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_example(path: Path) -> None:
    found = read_objects([str(path)])
    assert found.errors == []
    verdicts = [validate_object(o.body) for o in found.objects]
    if path.parent.name == "invalid":
        expected = [
            line.removeprefix("# expect:").strip() for line in path.read_text().splitlines() if "# expect:" in line
        ]
        assert expected, f"{path.name} must say which error it gets (# expect: ...)"
        assert not verdicts[0].valid
        messages = [str(p) for p in verdicts[0].problems]
        for fragment in expected:
            assert any(fragment in m for m in messages), (fragment, messages)
    elif path.name != "demo-cluster.yaml":
        assert verdicts and all(v.valid for v in verdicts), [str(p) for v in verdicts for p in v.problems]


def test_examples_cover_the_promised_accelerators() -> None:
    text = " ".join(p.read_text() for p in EXAMPLES.glob("*.yaml"))
    for name in ("H100", "A100", "L4", "MI300X", "Trainium2", "TPU-v5p", "profiles:", "timeSlicing"):
        assert name in text, name
