"""JSON Lines files written whole lines at a time, and read back past a torn last line.

`run_many`'s results file and `JSONLSink` share this. A record always encodes (a value
JSON cannot hold is stored as its text, a lone surrogate as a `\\u` escape), the whole
line is built first and written in one call, and a write that fails (a full disk) is
rolled back to the last whole line and raised as `WriteFailed` (the caller wraps it in
its `RecordWriteError`). A line cut short by a crash is skipped with a warning on reading,
and cut off before the next append.

Rule: a helper at the bottom of the package; it imports nothing from agentloops.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO


class WriteFailed(OSError):
    """A record could not be written (a full disk, an I/O error); the file still holds
    whole lines only. Its message names the file; `errno` is the cause's."""


def encode_line(record: Mapping[str, Any]) -> bytes:
    """One JSON object and a newline, as UTF-8; never raises for the record's content."""
    try:
        return _dumps(record, ascii=False)
    except UnicodeEncodeError:  # a lone surrogate: escaped, it reads back as the same str
        return _dumps(record, ascii=True)


def _dumps(record: Mapping[str, Any], *, ascii: bool) -> bytes:
    try:
        text = json.dumps(record, ensure_ascii=ascii, default=as_text)
    except (TypeError, ValueError):  # circular, non-string keys: field by field
        text = json.dumps({k: _field(v) for k, v in record.items()}, ensure_ascii=ascii)
    return (text + "\n").encode("utf-8")


def _field(value: Any) -> Any:
    try:
        json.dumps(value, default=as_text)
    except (TypeError, ValueError):
        return as_text(value)
    return value


def as_text(value: Any) -> str:
    """`str(value)`, or a placeholder naming its type when that raises."""
    try:
        return str(value)
    except Exception:
        return f"<a {type(value).__name__} that cannot be printed>"


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """Each line's JSON object. Lines that do not parse are skipped, with one
    `RuntimeWarning` naming them (a torn last line is the usual one: a crash mid-write)."""
    bad: list[int] = []
    with path.open("rb") as f:
        for number, line in enumerate(f, 1):
            try:
                record = json.loads(line.decode("utf-8"))
            except ValueError:  # invalid UTF-8 is a ValueError too
                record = None
            if isinstance(record, dict):
                yield record
            elif line.strip():
                bad.append(number)
    if bad:
        shown = ", ".join(str(n) for n in bad[:10]) + (", ..." if len(bad) > 10 else "")
        warnings.warn(
            f"{path}: skipped {len(bad)} unreadable line(s) ({shown}); a line cut short by "
            "an interrupted write is one",
            RuntimeWarning,
            stacklevel=3,
        )


class JSONLFile:
    """An append-only JSONL file that only ever holds whole lines. Thread-safe.

    Opening it cuts off a torn last line (no newline: a crash mid-write), so the next
    record starts on a line of its own; with `report`, a `RuntimeWarning` says so (a
    caller that has just read the file and reported it passes `report=False`).
    """

    def __init__(self, path: str | Path, *, report: bool = True):
        self.path = Path(path)
        self.report = report
        self._lock = threading.Lock()
        self._file: BinaryIO = self.path.open("ab", buffering=0)
        try:
            self._repair()
        except BaseException:
            self._file.close()
            raise

    def _repair(self) -> None:
        fd = self._file.fileno()
        size = os.fstat(fd).st_size
        if size == 0:
            return
        with self.path.open("rb") as f:
            end = size
            while end > 0:  # find the last newline, reading back in blocks
                start = max(0, end - 65536)
                f.seek(start)
                block = f.read(end - start)
                at = block.rfind(b"\n")
                if at >= 0:
                    end = start + at + 1
                    break
                end = start
        if end == size:
            return
        os.ftruncate(fd, end)
        if self.report:
            warnings.warn(
                f"{self.path}: cut off a torn last line ({size - end} bytes, left by an "
                "interrupted write) before appending",
                RuntimeWarning,
                stacklevel=4,
            )

    def append(self, record: Mapping[str, Any]) -> None:
        """Write `record` as one whole line, or nothing.

        Raises:
            WriteFailed: the write failed (disk full, I/O error); the file is cut back to
                its last whole line.
        """
        data = encode_line(record)
        with self._lock:
            fd = self._file.fileno()
            before = os.fstat(fd).st_size
            try:
                rest = memoryview(data)
                while rest:  # a short write (a file size limit) is retried, to get its error
                    written = self._file.write(rest)
                    if not written:
                        raise OSError(f"a write stopped {len(rest)} bytes short")
                    rest = rest[written:]
            except OSError as exc:
                # No partial line for the next record to join (if this fails too, the
                # next open cuts it off).
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, before)
                failed = WriteFailed(f"{self.path}: could not write a record: {exc}")
                failed.errno = exc.errno
                raise failed from exc

    def close(self) -> None:
        with self._lock:
            self._file.close()
