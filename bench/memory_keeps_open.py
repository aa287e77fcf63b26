"""examples/memory.py with fusepy's own Operations.open and release (handle 0): what the
memory example would measure if it kept them (bench/NOTES.md, 2026-11-27 22:45). Not an
example to copy: a file unlinked while open is then reachable only through the page cache
its openers hold (a write to it, or a read of a range not yet read, fails with ENOENT),
which is why examples/memory.py keeps its own open."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from memory import Memory  # noqa: E402

from ldpfuse_py import Operations  # noqa: E402


class MemoryKeepsOpen(Memory):
    open = Operations.open
    release = Operations.release
