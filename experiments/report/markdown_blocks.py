"""Generated blocks inside hand-written markdown: replace what lies between two marker comments.

A block is ``<!-- reproduce:begin NAME -->`` ... ``<!-- reproduce:end NAME -->``.  Only the
text strictly between the two markers is replaced; every other byte of the file (the prose
around it, line endings, the markers themselves) stays as it was, so generated figures and
hand-written explanation can live in one file without either overwriting the other.  A missing
file or marker is reported, never created: where a table goes is the writer's decision.
"""

from __future__ import annotations

import os
import re
import shutil
from typing import Callable

BEGIN = "<!-- reproduce:begin {name} -->"
END = "<!-- reproduce:end {name} -->"


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(re.escape(BEGIN.format(name=name)) + r"(.*?)" + re.escape(END.format(name=name)),
                      re.S)


def replace_block(text: str, name: str, body: str) -> str | None:
    """``text`` with block ``name`` holding ``body`` (between newlines), or None if the
    markers are missing."""
    match = _pattern(name).search(text)
    if not match:
        return None
    return text[:match.start(1)] + "\n" + body.strip("\n") + "\n" + text[match.end(1):]


def block(text: str, name: str) -> str | None:
    """What block ``name`` holds now (between its markers), or None if the markers are
    missing."""
    match = _pattern(name).search(text)
    return match.group(1) if match else None


def heading_before(text: str, name: str) -> str | None:
    """The last markdown heading above block ``name`` (the section the block belongs to)."""
    match = _pattern(name).search(text)
    if not match:
        return None
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text[:match.start()], re.M)
    return headings[-1] if headings else None


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def read(path: str) -> str | None:
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8", newline="") as fh:
        return fh.read()


def update_file(path: str, blocks: dict[str, str], say: Callable[[str], None]) -> list[str]:
    """Replace each named block of ``path``; the names replaced.  A missing file or marker is
    one line through ``say`` and the rest goes on."""
    text = read(path)
    if text is None:
        say(f"reproduce: {path} does not exist; its blocks ({', '.join(blocks)}) were not written")
        return []
    done = []
    for name, body in blocks.items():
        new = replace_block(text, name, body)
        if new is None:
            say(f"reproduce: {path} has no block {BEGIN.format(name=name)} ... "
                f"{END.format(name=name)}; left as it is")
            continue
        text, done = new, done + [name]
    if done:
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        shutil.copymode(path, tmp)
        os.replace(tmp, path)
    return done
