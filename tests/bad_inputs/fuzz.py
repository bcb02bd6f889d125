"""Deterministic mutations of a valid TorchScript archive, for the fuzz test.

Each seed names one damaged variant of the same valid ``.pt`` bytes, so a failing seed
is a complete, replayable regression case (see ``tests/fuzz_regressions/``).

Two families of damage matter, because they reach torch differently:

* *raw* damage (truncation, flipped bytes in a member's stored bytes, in a local header
  or in the central directory) leaves checksums that no longer match: a careful reader
  can see it before interpreting anything;
* *rebuilt* damage (flipped, truncated, replaced, swapped or dropped member contents,
  written back as a well-formed zip with correct checksums) can only be caught by the
  code that interprets the members — this is what could crash torch's loader.
"""

from __future__ import annotations

import io
import random
import zipfile
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["KINDS", "Variant", "make_variant", "member_spans", "replay"]


@dataclass(frozen=True)
class Variant:
    """One damaged archive: its seed, how it was made, and its bytes."""

    seed: int
    kind: str
    detail: str
    data: bytes

    @property
    def label(self) -> str:
        """Short text for test ids and reports: ``seed 17: flip-content data.pkl``."""
        return f"seed {self.seed}: {self.kind} {self.detail}".rstrip()


def member_spans(data: bytes) -> list[tuple[str, int, int]]:
    """(name, start, end) of each member's stored bytes in the archive ``data``."""
    spans = []
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in archive.infolist():
            # Local header: 30 fixed bytes + name + extra field (extra may differ from
            # the central directory's copy, so read it from the local header itself).
            off = info.header_offset
            name_len = int.from_bytes(data[off + 26 : off + 28], "little")
            extra_len = int.from_bytes(data[off + 28 : off + 30], "little")
            start = off + 30 + name_len + extra_len
            spans.append((info.filename, start, start + info.compress_size))
    return spans


def _members(data: bytes) -> list[tuple[zipfile.ZipInfo, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return [(info, archive.read(info)) for info in archive.infolist()]


def _rebuild(members: list[tuple[zipfile.ZipInfo, bytes]]) -> bytes:
    """A well-formed zip (correct checksums) with the given member contents."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for info, content in members:
            new = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            new.compress_type = info.compress_type
            archive.writestr(new, content)
    return out.getvalue()


def _short(name: str) -> str:
    return name.split("/", 1)[1] if "/" in name else name


def _flip(content: bytes, rng: random.Random, count: int) -> bytes:
    buf = bytearray(content)
    # Distinct positions, and a non-zero XOR: the variant always differs from the original.
    for pos in rng.sample(range(len(buf)), min(count, len(buf))):
        buf[pos] ^= (1 << rng.randrange(8)) if rng.random() < 0.5 else rng.randrange(1, 256)
    return bytes(buf)


def _truncate(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    cut = rng.randrange(1, len(data))
    return f"at {cut}/{len(data)}", data[:cut]


def _flip_raw(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    name, start, end = rng.choice([s for s in member_spans(data) if s[2] > s[1]])
    buf = bytearray(data)
    buf[start:end] = _flip(data[start:end], rng, rng.randint(1, 4))
    return _short(name), bytes(buf)


def _flip_header(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    # Damage the zip bookkeeping itself: a local header or the central directory.
    spans = member_spans(data)
    cd_start = data.rfind(b"PK\x01\x02", 0, len(data))
    first_cd = data.find(b"PK\x01\x02")
    if rng.random() < 0.5 and first_cd > 0:
        pos = rng.randrange(first_cd, len(data))
        where = f"central directory +{pos - first_cd}"
    else:
        name, start, _end = rng.choice(spans)
        header = data.rfind(b"PK\x03\x04", 0, start)
        pos = rng.randrange(header, start)
        where = f"local header of {_short(name)} +{pos - header}"
    del cd_start
    buf = bytearray(data)
    buf[pos] ^= rng.randrange(1, 256)
    return where, bytes(buf)


def _flip_content(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    members = _members(data)
    i = rng.randrange(len(members))
    info, content = members[i]
    members[i] = (info, _flip(content, rng, rng.randint(1, 4)))
    return _short(info.filename), _rebuild(members)


def _truncate_member(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    members = _members(data)
    i = rng.randrange(len(members))
    info, content = members[i]
    cut = rng.randrange(0, max(1, len(content)))
    members[i] = (info, content[:cut])
    return f"{_short(info.filename)} to {cut}/{len(content)}", _rebuild(members)


def _garbage_member(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    members = _members(data)
    i = rng.randrange(len(members))
    info, content = members[i]
    members[i] = (info, rng.randbytes(max(1, len(content))))
    return _short(info.filename), _rebuild(members)


def _swap_members(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    members = _members(data)
    i, j = rng.sample(range(len(members)), 2)
    (info_i, content_i), (info_j, content_j) = members[i], members[j]
    members[i], members[j] = (info_i, content_j), (info_j, content_i)
    return f"{_short(info_i.filename)} <-> {_short(info_j.filename)}", _rebuild(members)


def _drop_member(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    members = _members(data)
    info, _ = members.pop(rng.randrange(len(members)))
    return _short(info.filename), _rebuild(members)


#: Mutation kinds, in the order seeds cycle through them (seed % len(KINDS)).
KINDS: dict[str, Callable[[bytes, random.Random], tuple[str, bytes]]] = {
    "truncate": _truncate,
    "flip-raw": _flip_raw,
    "flip-header": _flip_header,
    "flip-content": _flip_content,
    "truncate-member": _truncate_member,
    "garbage-member": _garbage_member,
    "swap-members": _swap_members,
    "drop-member": _drop_member,
}


def make_variant(valid: bytes, seed: int) -> Variant:
    """The damaged variant number ``seed`` of the archive ``valid`` (deterministic)."""
    names = list(KINDS)
    kind = names[seed % len(names)]
    rng = random.Random(seed)
    detail, data = KINDS[kind](valid, rng)
    return Variant(seed=seed, kind=kind, detail=detail, data=data)


def _central_entry(data: bytes, member: str) -> int:
    """Offset of ``member``'s central-directory entry (short name, e.g. ``data/3``)."""
    pos = data.find(b"PK\x01\x02")
    while pos >= 0:
        name_len = int.from_bytes(data[pos + 28 : pos + 30], "little")
        name = data[pos + 46 : pos + 46 + name_len].decode("utf-8", "replace")
        if _short(name) == member:
            return pos
        pos = data.find(b"PK\x01\x02", pos + 4)
    raise LookupError(member)


def replay(valid: bytes, spec: dict[str, object]) -> Variant:
    """Re-make a damaged archive from an explicit description (a regression case).

    Seeds replay only while the valid archive's layout stays the same; a regression
    case therefore also records *what* the damage was, in a form that does not depend
    on the random generator:

    * ``{"op": "seed", "seed": 17}`` — the fuzz variant itself;
    * ``{"op": "truncate-member", "member": "data/3", "keep": 0}`` — keep the first
      ``keep`` bytes of a member, checksums rewritten to match;
    * ``{"op": "central-flag", "member": "constants.pkl", "mask": 1}`` — XOR the
      general-purpose flags of a member's central-directory entry (bit 0: encrypted).

    Args:
        valid: the intact archive.
        spec: one of the forms above.

    Returns:
        The damaged :class:`Variant` (seed -1 for explicit forms).
    """
    op = spec["op"]
    if op == "seed":
        return make_variant(valid, int(str(spec["seed"])))
    member = str(spec["member"])
    if op == "truncate-member":
        keep = int(str(spec["keep"]))
        members = _members(valid)
        for i, (info, content) in enumerate(members):
            if _short(info.filename) == member:
                members[i] = (info, content[:keep])
                detail = f"{member} to {keep}/{len(content)}"
                return Variant(-1, "truncate-member", detail, _rebuild(members))
        raise LookupError(member)
    if op == "central-flag":
        mask = int(str(spec["mask"]))
        buf = bytearray(valid)
        at = _central_entry(valid, member) + 8
        flags = int.from_bytes(buf[at : at + 2], "little") ^ mask
        buf[at : at + 2] = flags.to_bytes(2, "little")
        return Variant(-1, "central-flag", f"{member} flags ^= {mask:#x}", bytes(buf))
    raise ValueError(f"unknown regression op {op!r}")
