"""The checksum chain that binds a durable run's records to their run (journal format 2).

Each record the engine writes carries `data["sum"]`: a hash of the previous record's sum
and this record's kind, key and data, from a seed made of the run id and the run's nonce
(kept in its header). A record copied from another run (or from an earlier run under the
same id), edited by hand, dropped or moved breaks the chain at the first record that no
longer follows, and the journal is refused as it is read. It catches accidents and hand
edits, not a forger: nothing secret goes into the hash.

Copying records into another run (a fork) re-chains them: take their entries without
`sum` and write them through the new run's session, which seals them from its own seed.

A live run's records are encoded once (`Chain.encode`): the JSON text the checksum is
taken over is the text the store keeps, with the checksum added as the object's last field.

Rule: pure functions over records; no store, no driver, no loop.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agentloops.errors import CheckpointError
from agentloops.journal._base import NewRecord
from agentloops.journal.records import Entry, JournalRecord

FIELD = "sum"
"""The field of a record's data that holds its checksum."""


def _hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


# One encoder, built once (`json.dumps` with options builds one per call). Keys sorted, so
# the text does not depend on a store keeping their order.
_encode = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode
# The same text, refusing what a store refuses (NaN, infinities): what `Chain.encode` stores.
_strict = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False).encode
_string = json.encoder.encode_basestring_ascii  # a str as `_encode` writes it


def digest(previous: str, kind: str, key: str | None, data: Mapping[str, Any]) -> str:
    """The checksum of a record that follows one whose checksum is `previous`: a hash of
    that checksum, this record's kind and key, and its data (but `sum`) as JSON."""
    body = {k: v for k, v in data.items() if k != FIELD} if FIELD in data else data
    try:
        text = _encode([kind, key, body])
    except TypeError:  # keys that are not all strings: hash them as the store keeps them
        text = _encode([kind, key, json.loads(json.dumps(body))])
    return _hash(f"{previous}\n{text}")


class Chain:
    """Where a run's chain stands: the last record's checksum and seq."""

    __slots__ = ("last", "run_id", "seq", "stale")

    def __init__(self, run_id: str, nonce: str):
        self.run_id = run_id
        self.last = _hash(f"agentloops journal\n{run_id}\n{nonce}")
        self.seq = 0
        self.stale = False
        """A write failed part-way: whether it committed is unknown until the journal is
        read again (`catch_up`)."""

    @classmethod
    def of(cls, run_id: str, meta: Mapping[str, Any]) -> Chain | None:
        """The chain of a run with this header, or `None` for a journal without checksums
        (format 1)."""
        if meta.get("format") == 1:
            return None
        nonce = meta.get("nonce")
        if not isinstance(nonce, str) or not nonce:
            raise CheckpointError(
                f"run {run_id!r}: the header of a format {meta.get('format')!r} journal has no "
                f"nonce (got {nonce!r}); its records cannot be checked",
                run_id=run_id,
                field="nonce",
            )
        return cls(run_id, nonce)

    def verify(self, record: JournalRecord) -> None:
        """Take `record` as the chain's next one, or raise `CheckpointError`."""
        if record.run_id != self.run_id or record.seq != self.seq + 1:
            where = f"record {record.seq} of run {record.run_id!r}"
            raise CheckpointError(
                f"run {self.run_id!r}: {where} does not follow record {self.seq}",
                run_id=self.run_id,
                seq=record.seq,
            )
        found = record.data.get(FIELD)
        expected = digest(self.last, record.kind, record.key, record.data)
        if found != expected:
            why = "has no checksum" if found is None else "has a checksum that does not match"
            raise CheckpointError(
                f"run {self.run_id!r}: journal record {record.seq} ({record.kind}) {why} "
                f"(field {FIELD!r}): it was edited, moved, or copied from another run",
                run_id=self.run_id,
                seq=record.seq,
                field=FIELD,
            )
        self.last, self.seq = expected, record.seq

    def seal(self, entries: Sequence[Entry]) -> tuple[list[Entry], str]:
        """`entries` with their checksums, as the next records; and the last checksum.
        The chain moves only once they are written (`moved`)."""
        sealed: list[Entry] = []
        last = self.last
        for entry in entries:
            kind, data = entry[0], entry[1]
            key = entry[2] if len(entry) == 3 else None
            last = digest(last, kind, key, data)
            sealed.append((kind, {**data, FIELD: last}, key))
        return sealed, last

    def encode(self, entries: Sequence[Entry]) -> tuple[list[NewRecord], str] | None:
        """`entries` sealed as `seal` does, and encoded for the store in the same pass: each
        data's JSON text (keys sorted) is both what the checksum is taken over and what is
        stored, with `"sum"` added as its last field. `None` when an entry needs `seal` and
        the store's own checks (data that is not a JSON object of string keys, a value JSON
        has no text for, a `sum` given, a key repeated, a kind or key that is no name)."""
        records: list[NewRecord] = []
        keys: set[tuple[str, str]] = set()
        last = self.last
        for entry in entries:
            kind, data = entry[0], entry[1]
            key = entry[2] if len(entry) == 3 else None
            if type(data) is not dict or FIELD in data or type(kind) is not str or not kind:
                return None
            if key is not None:
                if type(key) is not str or not key or (kind, key) in keys:
                    return None
                keys.add((kind, key))
            try:
                body = _strict(data)
            except (TypeError, ValueError):
                return None
            head = f"{_string(kind)},{'null' if key is None else _string(key)}"
            last = _hash(f"{last}\n[{head},{body}]")  # as `digest`: [kind, key, data]
            text = f'{body[:-1]}{"," if len(body) > 2 else ""}"{FIELD}":"{last}"}}'
            records.append(NewRecord(kind, text, key))
        return records, last

    def moved(self, last: str, seq: int) -> None:
        """The sealed entries were written; the last one has `seq`."""
        self.last, self.seq = last, seq

    def catch_up(self, records: Iterable[JournalRecord]) -> None:
        """After a write that failed part-way: take the records the journal holds past
        `seq` (the write's, if it committed), and go on from there."""
        for record in records:
            self.verify(record)
        self.stale = False
