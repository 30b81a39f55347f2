"""A table's state in the changelog as a head and parts, so that a commit writes what changed.

By mid-shoe a table's state is about 27 KB, and most of it stays as it was from one commit to the
next: the rounds it keeps after they are settled, its finished shoes, most of its window of seen
event ids. So the state goes to the changelog as a head (what every event changes: where the
table is in play, with its value's offsets and outputs) and parts: each round it keeps, each
shoe, each block of the window. The head carries within it the parts that changed since the last
head (the round in play, the shoe, the block of ids being filled: most commits write a table as
one record); a part the last head carried that has not changed since is written on its own, as a
version the head names, and stays there until it changes again (a settled round, a full block).

A part's version is never written twice: its key holds the table's key, the part's name and the
version (the worker process that wrote it, and which of that worker's writes), and a head names
the versions it is made of. A write of a table (at a commit, or ahead of one for a table whose
chain of alerts grew) sends its new versions, then its head, then tombstones for the versions of
this worker the head no longer names, all on the table's partition, in that order; so the
changelog holds every version its last head names, wherever a crash cut a write short. A worker
names only versions it wrote (its first write of a table carries every part the table's earlier
writer stored) and deletes only those: a worker that lost its partitions but still had a write
in flight (frozen past its session timeout, say) and its successor never delete what the other's
heads name, so the table's last head, whoever wrote it, is whole. What no head names (a write cut
short, the versions of the table's earlier writer) the worker that recovers the partition
deletes, once no worker can still be sending a head that names it (a producer's request timeout
later: the head of a write cut short may be on its way still).
"""

from __future__ import annotations

from collections.abc import Container, Iterable

import msgspec

from ..detect.watch import DIGEST_SIZE, RoundWatch, ShoeWatch, TableState

PART = b"\xff"  # begins a part's key: no UTF-8 text, so no table's key, holds this byte
ROUND, SHOE, IDS = b"r", b"s", b"w"  # a part's name: its kind, then the round's or shoe's id, or the block's number
CARRIED = b""  # the version of a part the head carries: a written version names its writer
IDS_BLOCK = 128 * DIGEST_SIZE  # the window of seen ids, 8 KB when full, in blocks of 1 KB: an event changes one

_encode = msgspec.msgpack.Encoder().encode
_round = msgspec.msgpack.Decoder(RoundWatch)
_shoe = msgspec.msgpack.Decoder(ShoeWatch)
_block = msgspec.msgpack.Decoder(bytes)


def part_key(table_key: bytes, name: bytes, version: bytes) -> bytes:
    """The key of a version of a part; ``version`` holds no colon."""
    return b"%s%s%s%s:%s" % (PART, table_key, PART, version, name)


def is_part(key: bytes) -> bool:
    return key[:1] == PART


def table_of(key: bytes) -> bytes:
    """The key of the table a part's key belongs to."""
    return key[1 : key.index(PART, 1)]


def split(state: TableState, unchanged: Container[bytes]) -> tuple[TableState, dict[bytes, bytes | None]]:
    """The state without its rounds, shoes and window of seen ids (the head's), and those, encoded,
    by part name, in the state's order; None for each part named in ``unchanged``, left unencoded."""
    parts: dict[bytes, bytes | None] = {}
    for round_id, watched in state.rounds.items():
        name = ROUND + round_id.encode()
        parts[name] = None if name in unchanged else _encode(watched)
    parts.update((SHOE + shoe_id.encode(), _encode(watched)) for shoe_id, watched in state.shoes.items())
    window = state.recent_digests
    parts.update((b"%s%d" % (IDS, at // IDS_BLOCK), _encode(bytes(window[at : at + IDS_BLOCK]))) for at in range(0, len(window), IDS_BLOCK))
    return msgspec.structs.replace(state, rounds={}, shoes={}, recent_digests=bytearray()), parts


def joined(head: TableState, parts: Iterable[tuple[bytes, bytes]]) -> TableState:
    """The state ``split`` made ``head`` of, from the parts, (name, encoded), in the order it gave
    them: ``head`` itself, its rounds, shoes and window put back."""
    window = []
    for name, encoded in parts:
        kind, ident = name[:1], name[1:]
        if kind == ROUND:
            head.rounds[ident.decode()] = _round.decode(encoded)
        elif kind == SHOE:
            head.shoes[ident.decode()] = _shoe.decode(encoded)
        elif kind == IDS:
            window.append(_block.decode(encoded))
        else:
            raise ValueError(f"a part of a table's state named {name[:60]!r}: not a round, a shoe or a block of ids")
    head.recent_digests = bytearray(b"".join(window))
    return head
