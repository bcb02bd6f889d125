"""Render docs/architecture.dot, the map's one picture, to docs/architecture.svg.

Run it after editing the .dot file (``make architecture-picture`` does the same)::

    .venv/bin/python scripts/render_architecture.py

Graphviz's ``dot`` draws the SVG; the SHA-256 of the .dot source is written into it as a
comment, so ``tests/test_docs_architecture.py`` can tell an SVG drawn from another
version of the source without running Graphviz (whose output also differs from one
Graphviz release to the next). Exits 2 with one sentence when ``dot`` is missing or fails.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "docs" / "architecture.dot"
PICTURE = ROOT / "docs" / "architecture.svg"


def source_stamp(source: bytes) -> str:
    """The comment the SVG carries: which .dot source it was drawn from."""
    return f"<!-- architecture.dot sha256:{hashlib.sha256(source).hexdigest()} -->"


def main() -> int:
    dot = shutil.which("dot")
    if dot is None:
        print("Graphviz's dot is not installed: `make graphviz` installs it.", file=sys.stderr)
        return 2
    source = SOURCE.read_bytes()
    done = subprocess.run([dot, "-Tsvg"], input=source, capture_output=True, check=False)
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip()
        print(f"dot could not draw {SOURCE.name}: {reason}", file=sys.stderr)
        return 2
    svg = done.stdout.decode()
    # The stamp goes after the XML declaration and doctype, before the <svg> element.
    head, sep, rest = svg.partition("<svg")
    text = f"{head}{source_stamp(source)}\n{sep}{rest}"
    # Written whole or not at all: a temporary file beside the picture, then renamed.
    fd, tmp = tempfile.mkstemp(dir=PICTURE.parent, prefix=".architecture.", suffix=".svg")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.chmod(tmp, 0o644)  # mkstemp's file is private; the picture is a doc like the others
        os.replace(tmp, PICTURE)
    except BaseException:
        os.unlink(tmp)
        raise
    print(f"wrote {PICTURE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
