"""The layout of llama.cpp's unified KV pool, mirrored, so a sequence's cells stay in the order
of their positions (`_llama_batch`'s reproducible mode: flash attention sums a token's visible
cells in their order in the pool).

llama.cpp (`llama_kv_cache::find_slot`) gives a decode's tokens the first free cells from its
head, in the batch's order; the head moves past them, and down to any cell `seq_rm` frees below
it. So while no free cell lies below a used one, new cells go on top, in order, and the layout
is a list in allocation order. A free cell below a used one (a hole) is where a later token
could land before its sequence's earlier cells: `holes` says so, and `LlamaContext` compacts the
pool before the next decode (`compact`: the whole cache written out and read back, which puts
the used cells from cell 0 in their order, and the head at 0, under the used cells' top).

Sliding-window models keep a second pool for their windowed layers; at its own size it reuses
cells as they leave the window, out of order. `LlamaCppModel` makes it full-size in
reproducible mode (`swa_full`): then it fills like the main pool, and this mirror is both
pools', as long as no cell has left its sequence's window (a sequence longer than the window:
llama.cpp may then put a new token in such a cell, below the others).
"""

from __future__ import annotations

import ctypes
from typing import Any

__all__ = ["Cells"]


class Cells:
    """Each used cell's position and sequences, in the pool's order (None: freed)."""

    def __init__(self) -> None:
        self._cells: list[tuple[int, set[int]] | None] = []

    def __len__(self) -> int:
        return len(self._cells)

    @property
    def holes(self) -> bool:
        """Does a freed cell lie below a used one?"""
        return None in self._cells

    def add(self, seq: int, pos: int) -> None:
        """A decoded token's cell: on top (there are no holes when a batch is decoded)."""
        self._cells.append((pos, {seq}))

    def remove(self, seq: int, p0: int = 0, p1: int = -1) -> None:
        """`llama_memory_seq_rm(seq, p0, p1)`: the sequence leaves its cells in [p0, p1)."""
        end = p1 if p1 >= 0 else 1 << 62
        cells = self._cells
        for i, cell in enumerate(cells):
            if cell is not None and seq in cell[1] and p0 <= cell[0] < end:
                cell[1].discard(seq)
                if not cell[1]:
                    cells[i] = None
        while cells and cells[-1] is None:  # freed on top: the head moves down, no hole
            cells.pop()

    def copy(self, src: int, dst: int, p0: int, p1: int) -> None:
        """`llama_memory_seq_cp(src, dst, p0, p1)`: dst shares src's cells in [p0, p1)."""
        for cell in self._cells:
            if cell is not None and src in cell[1] and p0 <= cell[0] < p1:
                cell[1].add(dst)

    def clear(self) -> None:
        self._cells = []

    def compact(self, lib: Any, ctx: Any) -> None:
        """Close the holes: llama.cpp writes every used cell out in the pool's order and reads
        them back from cell 0 (`llama_state_seq_*_data` over all sequences, -1)."""
        size = int(lib.llama_state_seq_get_size(ctx, -1))
        buf = (ctypes.c_uint8 * size)()
        wrote = int(lib.llama_state_seq_get_data(ctx, buf, size, -1))
        read = int(lib.llama_state_seq_set_data(ctx, buf, wrote, -1))
        if wrote == 0 or read != wrote:
            from sdk.errors import LocalModelError

            raise LocalModelError("llama.cpp could not compact its KV cache")
        self._cells = [c for c in self._cells if c is not None]
