"""Where the tests find the repository, its tools and ../shared, and the one way to skip (or, under
REQUIRE_TOOLS=1 as in CI, fail) a test whose tool or shared file is missing."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
TOOLS_BIN = ROOT / ".tools" / "bin"
SHARED = ROOT.parent / "shared"
"""The project's shared folder beside the checkout: published CRDs, recorded truth (fidelity/)."""


def missing(why: str) -> NoReturn:
    """Something a test needs is not here: skip it with the reason, or fail when REQUIRE_TOOLS=1 (CI has
    every tool and ../shared, so a miss there is a broken setup, not a reason to skip)."""
    if os.environ.get("REQUIRE_TOOLS") == "1":
        pytest.fail(f"{why} (required under REQUIRE_TOOLS=1)")
    pytest.skip(why)


def require_tool(name: str) -> str:
    """The path of an external tool; skip when missing, fail when REQUIRE_TOOLS=1."""
    found = shutil.which(name) or (str(TOOLS_BIN / name) if (TOOLS_BIN / name).exists() else None)
    if found:
        return found
    missing(f"{name} is not installed: `make tools` fetches it")


def require_shared(relative: str) -> Path:
    """A file or folder of ../shared (never copied into the repository); skip when it is absent, fail
    when REQUIRE_TOOLS=1 (CI has it beside every clone)."""
    found = SHARED / relative
    if not found.exists():
        missing(f"{found} is missing (../shared, beside the checkout, holds it)")
    return found


async def kubectl(server: str, *args: str) -> str:
    """The real kubectl against `server` (stdout); fails the test with its stderr unless it exits 0."""
    done = await asyncio.to_thread(
        subprocess.run,
        [require_tool("kubectl"), "--server", server, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
