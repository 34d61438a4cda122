"""Where a thread's values of a 64-row warpgroup-MMA accumulator lie (the fp32 C fragment of
m64nNk16: values ((2, 2, N / 8)), e = v0 + 2 v1 + 4 v2, on 2 rows and N / 4 columns of the tile).

The elementwise passes over accumulators (recompute_wu's fold, fwd_o's P, spine_rs' Y^T) load a
per-row or per-column factor once for the values that share it; these name which one a value
needs and which value first lies on a row or column (trace-time Python: compile-time indices).
"""
from __future__ import annotations


def row(e: int) -> int:
    """The thread's row (0 or 1: 8 rows apart) that value e lies on."""
    return (e // 2) % 2


def col(e: int) -> int:
    """The thread's column (0 .. N / 4 - 1) that value e lies on: values e and e + 2 share one."""
    return e % 2 + 2 * (e // 4)


def first_of_row(r: int) -> int:
    """The first value on the thread's row r."""
    return 2 * r


def first_of_col(c: int) -> int:
    """The first value on the thread's column c."""
    return c % 2 + 4 * (c // 2)


def holds_diagonal(lane):
    """Whether this lane holds diagonal values of a 64 x 64 accumulator: of the 4 lanes that share
    row group g = lane // 4, the one whose columns 2 (lane % 4) + {0, 1} hold column g.  Plain
    arithmetic, so lane may be a Python int or a traced Int32."""
    return lane % 4 == (lane // 4) // 2


def diagonal(w: int, h: int, odd: int) -> int:
    """The value on the diagonal of a 64 x 64 accumulator (K K^T, say) at row 16 w + 8 h + g, for the
    lane of warp w with g = lane // 4 that holds_diagonal, odd = g % 2: column 8 (2 w + h) + g is
    the thread's column 2 (2 w + h) + odd, on its row h."""
    return first_of_col(2 * (2 * w + h) + odd) + 2 * h     # + 2 h: the same column on row h


def row_offset(r: int) -> int:
    """Row r's distance from the thread's first row (the C fragment's rows are 8 apart)."""
    return 8 * r


def col_offset(c: int) -> int:
    """Column c's distance from the thread's first column: columns 2 (lane % 4) + {0, 1} of each
    8-column block."""
    return 8 * (c // 2) + c % 2


assert all(col(first_of_col(c)) == c for c in range(32)) and all(row(first_of_row(r)) == r for r in range(2))
