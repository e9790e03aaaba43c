"""A 256-entry byte table as HVX's vlut32 reads it: two 128-byte vectors, eight lookups merged.

`Vd.b = vlut32(Vu.b, Vv.b, Rt)` (V60, 128-byte vectors): with k = Rt & 7, a lane whose index byte i has
i >> 5 == k gets byte (k >> 1) & 1 of halfword (i mod 64) of Vv, every other lane 0 (the `|=` form leaves it).
Halfword i mod 64 is halfword 32 * (k & 1) + (i & 31), so one vector holds four 32-entry segments: k = 0 and 1
in the halfwords' low bytes, k = 2 and 3 in their high bytes; k = 4..7 (entries 128..255) lie the same way in a
second vector. A lookup of all 256 entries is one vlut32 and seven vlut32|=, no lane matching two of them."""
from __future__ import annotations

ENTRIES = 256
SEGMENT = 32  # entries per lookup
VECTOR = 128


def vlut32_bytes(table: tuple[int, ...]) -> tuple[int, ...]:
    """The table's 256 entries in the order of the two vectors vlut32 reads (vector k // 4 for segment k)."""
    if len(table) != ENTRIES:
        raise ValueError(f"a vlut32 table has {ENTRIES} entries, got {len(table)}")
    out = [0] * ENTRIES
    for entry, value in enumerate(table):
        out[_position(entry)] = value
    return tuple(out)


def _position(entry: int) -> int:
    k, lane = entry // SEGMENT, entry % SEGMENT
    vector, segment = divmod(k, 4)
    halfword = SEGMENT * (segment & 1) + lane
    return vector * VECTOR + 2 * halfword + (segment >> 1)


def vlut32(indices: bytes | list[int], vector: tuple[int, ...], rt: int) -> list[int]:
    """One vlut32 on 128 index bytes, as the instruction's definition above reads it (for tests)."""
    k = rt & 7
    odd = (rt >> 1) & 1
    return [vector[2 * (i % 64) + odd] if i >> 5 == k else 0 for i in indices]


def lookup(indices: bytes | list[int], laid_out: tuple[int, ...]) -> list[int]:
    """The kernel's eight lookups merged (kg_gate in conv2d_uint8.c.j2), in Python."""
    result = [0] * len(indices)
    for k in range(ENTRIES // SEGMENT):
        vector = laid_out[(k // 4) * VECTOR:(k // 4 + 1) * VECTOR]
        result = [r | x for r, x in zip(result, vlut32(indices, vector, k))]
    return result
