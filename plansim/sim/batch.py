"""A request's state on a rank (``Request``) and the rank's running batch as arrays in batch
order (``Batch``, a struct of arrays).

Row ``i`` is ``reqs[i]``, the ``i``-th request of the batch. While a request runs, these arrays
hold its changing state: tokens computed, known length (prompt + generated), KV blocks held,
the rank pass that last granted it tokens and its computed tokens before that grant. The rank
advances every decoding request of a pass in one step over a slice of rows (a vector step, or
one loop over the rows' lists for a short slice); only the requests whose state changes
otherwise (prompt chunks, admissions, completions, preemptions) are handled one by one, from
their rows or through the ``Request`` attributes of the same names, which read and write the
row while the request is in the batch (the two classes share that protocol, hence one module).

Rows stay in batch order: removing requests closes the gap (the arrays shift, and so do the
row numbers of the requests behind).
"""

from __future__ import annotations

import numpy as np

from plansim.sim.kv import gen_keys

_FIELDS = ("rid", "isl", "total", "computed", "known", "blocks", "pass_no", "before")

# The per-pass steps over the batch (the decode-run check and end, token stamps) take a plain
# Python path below SCALAR_ROWS rows: a step of about ten numpy calls costs about 4 us (token
# stamps, the decode-run check) to 8 us (a run's stamps) whatever the size, and loops over lists
# cost as much at about 16 rows (measured on 1 December). Decoding rows are granted one by one
# below SCALAR_GRANT_ROWS, where the per-request ``grant`` (about 3 us a row) is cheaper than the
# vector step (about 10 us), and from SCALAR_GRANT_ROWS up to SCALAR_ROWS rows in one loop over
# the rows' lists. The paths give the same state; the modules read these at call time, so that
# tests can force either path. Runs of up to SCALAR_PASSES passes are timed and stamped as
# Python lists (their pass times a slice of the decode table, or ``decode_ms`` pass by pass),
# longer ones as arrays: a run's stamps cost about 8 us as arrays whatever its length
# (measured on 1 December), more than a short run's lists.
SCALAR_ROWS = 16
SCALAR_GRANT_ROWS = 4
SCALAR_PASSES = 16


class Request:
    """A request's state on one rank. ``generated`` counts tokens emitted on this rank;
    ``prebuilt``: its prompt KV came from a prefill worker; ``preempted``: it was preempted at
    least once; ``in_batch``: it is running. ``pass_no`` is the rank pass that last granted it
    tokens, ``computed_before`` its computed tokens before that grant.

    While the request runs, ``computed``, ``generated``, ``n_blocks``, ``pass_no`` and
    ``computed_before`` live in its row of the rank's ``Batch`` (the attributes read and write
    it), so that the rank can advance many rows in one vector step."""

    __slots__ = (
        "_batch",
        "_before",
        "_computed",
        "_generated",
        "_n_blocks",
        "_pass_no",
        "_row",
        "held",
        "host_loaded",
        "isl",
        "osl",
        "prebuilt",
        "preempted",
        "prompt_keys",
        "rid",
        "store_done_ms",
        "stored_blocks",
    )

    def __init__(
        self, rid: int, isl: int, osl: int, prompt_keys: list[int], *, prebuilt: bool = False
    ) -> None:
        self.rid = rid
        self.isl = isl
        self.osl = osl
        self.prompt_keys = prompt_keys
        self.held: list[int] = []
        self._batch: Batch | None = None
        self._row = 0
        self._n_blocks = 0
        # A transferred prompt arrives computed but for its last token, whose pass on the
        # decode worker emits the first visible token (the prefill worker's token is internal).
        self._computed = isl - 1 if prebuilt else 0
        self._generated = 0
        self._pass_no = -1
        self._before = 0
        self.prebuilt = prebuilt
        self.preempted = False
        # Host offload (``HostOffload``): the store cursor in prompt blocks, whether a load is
        # done for the coming admission, when the latest store lands.
        self.stored_blocks = 0
        self.host_loaded = False
        self.store_done_ms = 0.0

    @property
    def in_batch(self) -> bool:
        return self._batch is not None

    @property
    def computed(self) -> int:
        b = self._batch
        return self._computed if b is None else b.computed.item(self._row)

    @computed.setter
    def computed(self, value: int) -> None:
        b = self._batch
        if b is None:
            self._computed = value
        else:
            b.computed[self._row] = value

    @property
    def generated(self) -> int:
        b = self._batch
        return self._generated if b is None else b.known.item(self._row) - self.isl

    @generated.setter
    def generated(self, value: int) -> None:
        b = self._batch
        if b is None:
            self._generated = value
        else:
            b.known[self._row] = self.isl + value

    @property
    def n_blocks(self) -> int:
        b = self._batch
        return self._n_blocks if b is None else b.blocks.item(self._row)

    @n_blocks.setter
    def n_blocks(self, value: int) -> None:
        b = self._batch
        if b is None:
            self._n_blocks = value
        else:
            b.blocks[self._row] = value

    @property
    def pass_no(self) -> int:
        b = self._batch
        return self._pass_no if b is None else b.pass_no.item(self._row)

    @pass_no.setter
    def pass_no(self, value: int) -> None:
        b = self._batch
        if b is None:
            self._pass_no = value
        else:
            b.pass_no[self._row] = value

    @property
    def computed_before(self) -> int:
        b = self._batch
        return self._before if b is None else b.before.item(self._row)

    @computed_before.setter
    def computed_before(self, value: int) -> None:
        b = self._batch
        if b is None:
            self._before = value
        else:
            b.before[self._row] = value

    def seq_keys(self, n_full: int) -> list[int]:
        """Keys of the first ``n_full`` full blocks of the known sequence."""
        pk = self.prompt_keys
        if n_full <= len(pk):
            return pk[:n_full]
        return pk + gen_keys(self.rid, len(pk), n_full)


class Batch:
    """The running requests of one rank, ``reqs`` in batch order, and their state by row:
    ``rid``, ``isl``, ``total`` (prompt + output tokens: done when ``known`` reaches it),
    ``computed``, ``known``, ``blocks``, ``pass_no``, ``before`` (int64 arrays of at least
    ``len(reqs)`` rows; only the first ``len(reqs)`` mean anything). The arrays are the rows of
    one 2-D array, so that adding or removing requests moves all of them in one step."""

    __slots__ = ("reqs", "_state", *_FIELDS)

    def __init__(self, capacity: int = 32) -> None:
        self.reqs: list[Request] = []
        self._bind(np.zeros((len(_FIELDS), capacity), dtype=np.int64))

    def _bind(self, state: np.ndarray) -> None:
        self._state = state
        for name, row in zip(_FIELDS, state):
            setattr(self, name, row)

    def columns(self, start: int = 0, stop: int | None = None) -> list[list[int]]:
        """The live rows' state (rows ``start:stop``; default all) as Python lists, one per field
        in ``_FIELDS`` order (``rid``, ``isl``, ``total``, ``computed``, ``known``, ``blocks``,
        ``pass_no``, ``before``), in one numpy call: the scalar path's view of the batch."""
        return self._state[:, start : len(self.reqs) if stop is None else stop].tolist()

    def prompt_tokens_left(self) -> int:
        """Prompt tokens the running requests have still to compute (a transferred prompt's
        last token is not one: it is computed as a decode)."""
        n = len(self.reqs)
        rows = np.flatnonzero(self.computed[:n] < self.isl[:n]).tolist()
        reqs = self.reqs
        return sum(int(self.isl[i] - self.computed[i]) for i in rows if not reqs[i].prebuilt)

    def add(self, req: Request) -> None:
        """Append ``req`` (its state from its attributes) as the last row."""
        row = len(self.reqs)
        state = self._state
        if row == state.shape[1]:
            grown = np.zeros((len(_FIELDS), 2 * row), dtype=np.int64)
            grown[:, :row] = state
            self._bind(grown)
            state = grown
        state[:, row] = (
            req.rid,
            req.isl,
            req.isl + req.osl,
            req._computed,
            req.isl + req._generated,
            req._n_blocks,
            req._pass_no,
            req._before,
        )
        req._batch = self
        req._row = row
        self.reqs.append(req)

    def remove(self, rows: list[int]) -> None:
        """Take the requests of ``rows`` (ascending) out, their state back in their attributes."""
        reqs = self.reqs
        state = self._state
        for row in rows:
            req = reqs[row]
            _, isl, _, computed, known, blocks, pass_no, before = state[:, row].tolist()
            req._computed = computed
            req._generated = known - isl
            req._n_blocks = blocks
            req._pass_no = pass_no
            req._before = before
            req._batch = None
        # From the last removed row back: the rows behind each move up one (a copy of the rows
        # behind, and a list deletion), then the rows from the first removed one on are numbered
        # again.
        n = len(reqs)
        for row in reversed(rows):
            if row < n - 1:
                state[:, row : n - 1] = state[:, row + 1 : n]
            del reqs[row]
            n -= 1
        for i in range(rows[0], n):
            reqs[i]._row = i
