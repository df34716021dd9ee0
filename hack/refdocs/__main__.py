"""`python -m hack.refdocs [--check]`: write every generated reference page, or (`--check`) fail naming those
that differ from what the code renders. `make docs` and `make check-generated` run it from the
repository's root."""

from __future__ import annotations

import argparse
import difflib
import sys

from hack.refdocs.pages import ROOT, render_all


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hack.refdocs", description=__doc__)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a page is stale")
    args = parser.parse_args(argv)
    stale = []
    for relative, content in render_all(ROOT).items():
        path = ROOT / relative
        current = path.read_text() if path.exists() else ""
        if current == content:
            continue
        if args.check:
            stale.append(relative)
            diff = difflib.unified_diff(current.splitlines(), content.splitlines(), relative, "generated", lineterm="")
            print("\n".join(list(diff)[:40]), file=sys.stderr)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            print(f"wrote {relative}")
    if stale:
        print(f"stale: {', '.join(stale)}: run 'make docs'", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
