"""Figures about the operator's structure, printed as a Markdown table (docs/design/structure.md).

Run: `.venv/bin/python hack/structure_report.py [--since REV]`. Counts the operator package's
top-level modules, the attributes of the controller loop's state, the classes a pool passes
through in a planning pass, node and pool builders in the tests, the share of docstring lines,
and the length of commit subjects (all commits, or those after REV).
"""

from __future__ import annotations

import argparse
import ast
import statistics
import subprocess
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OPERATOR = ROOT / "operator" / "accelpool"
TESTS = ROOT / "tests"
LOOP_CLASSES = ("Controller", "ClusterState")
BUILDER_NAMES = (
    "node",
    "gpu_node",
    "node_object",
    "node_body",
    "node_view",
    "pool",
    "pool_object",
    "pool_body",
    "pool_input",
)


def python_files(root: Path) -> Iterator[Path]:
    yield from sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def top_level_modules() -> list[str]:
    return sorted(p.stem for p in OPERATOR.glob("*.py") if p.stem != "__init__")


def instance_attributes(cls: ast.ClassDef) -> set[str]:
    """Dataclass fields and every `self.NAME =` assignment in the class's methods."""
    names = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    for node in ast.walk(cls):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                names.add(target.attr)
    return names


def classes(root: Path) -> Iterator[tuple[Path, ast.ClassDef]]:
    for path in python_files(root):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                yield path, node


def loop_state() -> dict[str, int]:
    return {cls.name: len(instance_attributes(cls)) for _, cls in classes(OPERATOR) if cls.name in LOOP_CLASSES}


def pool_shapes() -> list[str]:
    """Classes named for one pool on its way through a pass (Pool* or _Planned): not the API, not sizing."""
    return sorted(
        f"{path.relative_to(OPERATOR)}:{cls.name}"
        for path, cls in classes(OPERATOR)
        if not {"api", "recommend"} & set(path.relative_to(OPERATOR).parts)
        and (cls.name.startswith(("Pool", "_Pool")) or cls.name == "_Planned")
    )


def test_builders() -> list[str]:
    found = []
    for path in python_files(TESTS):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.lstrip("_") in BUILDER_NAMES:
                found.append(f"{path.relative_to(ROOT)}:{node.name}")
    return sorted(found)


def docstring_share() -> tuple[int, int]:
    doc = total = 0
    for path in python_files(OPERATOR):
        text = path.read_text()
        total += len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                first = node.body[0] if node.body else None
                if (
                    isinstance(first, ast.Expr)
                    and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)
                ):
                    doc += (first.end_lineno or first.lineno) - first.lineno + 1
    return doc, total


def subject_lengths(since: str | None) -> list[int]:
    rev = [f"{since}..HEAD"] if since else []
    out = subprocess.run(
        ["git", "log", "--no-merges", "--format=%s", *rev], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    return [len(line) for line in out.splitlines()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--since", help="count commit subjects after this revision only")
    parser.add_argument("--list", action="store_true", help="also list the pool shapes and test builders")
    args = parser.parse_args()
    modules = top_level_modules()
    doc, total = docstring_share()
    subjects = subject_lengths(args.since)
    shapes, builders = pool_shapes(), test_builders()
    rows = [
        ("operator top-level modules", str(len(modules))),
        *((f"attributes of `{name}`", str(count)) for name, count in sorted(loop_state().items())),
        ("pool classes in a pass", str(len(shapes))),
        ("node/pool builders in tests", str(len(builders))),
        ("docstring lines in the operator", f"{doc} of {total} ({100 * doc / total:.0f}%)"),
        (
            "commit subjects",
            f"{len(subjects)}, mean {statistics.mean(subjects):.0f} chars, {sum(n > 72 for n in subjects)} over 72"
            if subjects
            else "none",
        ),
    ]
    print("| figure | value |\n| --- | --- |")
    for name, value in rows:
        print(f"| {name} | {value} |")
    if args.list:
        print("\nPool classes:", *shapes, sep="\n- ")
        print("\nTest builders:", *builders, sep="\n- ")


if __name__ == "__main__":
    main()
