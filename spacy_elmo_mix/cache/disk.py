"""The on-disk tier of the layer cache: append-only shard files shared between runs and processes.

A cache directory holds ``shard-NNNNNN.bin`` (entry bytes, see :mod:`.payload`) with their index
files ``shard-NNNNNN.idx`` (see :mod:`.index`) and a ``lock`` file.

- Writers take an exclusive ``fcntl.flock`` on ``lock``, append entries to the newest shard, fsync
  them, and only then replace the shard's index atomically; readers take no lock and only ever read
  bytes that an index they loaded points to, so they never see half-written entries. (``flock`` is
  not reliable on some network file systems: keep the cache on a local disk.)
- Reads are memory-mapped and verified block by block (crc32), so a request for layers ``0..t``
  reads and checks only those layers. An entry past the end of its file, a checksum mismatch or an
  unreadable index is reported once per file with a :class:`LayerCacheWarning` and treated as
  missing; the recomputed entry is appended again and the newest copy of a key wins. A writer
  resets a shard whose index is unreadable (empties it) so it stops being reported.
- Write errors (a full disk: ``ENOSPC``) roll the shard back to its previous length, leave the index
  and every entry already on disk valid, set :attr:`DiskTier.write_error` and warn once; from then on
  the tier is read-only for this process.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import mmap
import os
import re
import time
import warnings
import zlib
from pathlib import Path
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Set, Tuple

import numpy as np

from ..errors import ElmoFileError
from .index import DTYPE_CODES, IndexFileError, read_index, record_dtype, write_index
from .payload import block_sizes, cache_dtype

SHARD_FILE = re.compile(r"shard-(\d{6})\.(bin|idx)")


class LayerCacheWarning(UserWarning):
    """A cache file is damaged (its entries are recomputed) or the disk cache cannot be written."""


class Location(NamedTuple):
    """Where one entry lives: shard number, byte offset, token count, stored layers, block checksums."""

    shard: int
    offset: int
    n_tokens: int
    n_layers: int
    crcs: Tuple[int, ...]


class NewEntry(NamedTuple):
    """An entry to write: its key, token count, stored layers and flat array (see :mod:`.payload`)."""

    key: bytes
    n_tokens: int
    n_layers: int
    flat: np.ndarray


class DiskTier:
    """The entries of one model (fingerprint and dtype) in one directory.

    directory: created if missing; one directory per model fingerprint and dtype.
    width: ELMo vector width (``2 * projection_dim``).
    n_layers_total: number of ELMo layers of the model (LSTM layers + 1).
    dtype_name: ``"float16"`` or ``"float32"``, the stored precision.
    refresh_seconds: on a miss, re-read index files changed by other processes at most this often.
    max_shard_bytes, max_shard_entries: a writer starts a new shard once the newest has this many
        bytes or entries (bounding the index rewritten per write).
    """

    def __init__(
        self,
        directory: Path,
        width: int,
        n_layers_total: int,
        dtype_name: str,
        refresh_seconds: float = 1.0,
        max_shard_bytes: int = 1 << 30,
        max_shard_entries: int = 1 << 16,
    ):
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ElmoFileError(f"cannot create the ELMo layer cache directory {directory}: {exc}") from exc
        self.directory = directory
        self.width, self.n_layers_total, self.dtype_name = width, n_layers_total, dtype_name
        self.dtype = cache_dtype(dtype_name)
        self.refresh_seconds = refresh_seconds
        self.max_shard_bytes, self.max_shard_entries = max_shard_bytes, max_shard_entries
        self.write_error: Optional[str] = None
        self.corrupt_entries = 0
        self._entries: Dict[bytes, Location] = {}
        self._records: Dict[int, np.ndarray] = {}
        self._signatures: Dict[int, Tuple[int, int, int]] = {}
        self._broken: Set[int] = set()
        self._bad: Set[Location] = set()
        self._reported: Set[Path] = set()
        self._maps: Dict[int, Tuple[int, Optional[mmap.mmap]]] = {}
        self._last_refresh = float("-inf")
        self.refresh()

    def __len__(self) -> int:
        return len(self._entries)

    # ----------------------------------------------------------------------------------- reading
    def layers_of(self, key: bytes) -> int:
        """How many layers the disk holds for ``key`` as far as this process knows (0: none usable)."""
        location = self._entries.get(key)
        if location is None or location in self._bad:
            return 0
        return location.n_layers

    def get(self, key: bytes, n_layers: int) -> Optional[np.ndarray]:
        """The first ``n_layers`` blocks of ``key``'s entry, verified, or None (absent, too few layers, damaged)."""
        if self.layers_of(key) < n_layers and time.monotonic() - self._last_refresh >= self.refresh_seconds:
            self.refresh()
        if self.layers_of(key) < n_layers:
            return None
        return self._read(self._entries[key], n_layers)

    def refresh(self) -> None:
        """Load the index files that are new or changed since they were last read."""
        self._last_refresh = time.monotonic()
        for shard, path in self._files("idx"):
            try:
                stat = path.stat()
                signature = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
                if self._signatures.get(shard) == signature:
                    continue
                self._signatures[shard] = signature
                records = read_index(path, self.width, self.n_layers_total, self.dtype_name)
            except FileNotFoundError:
                continue
            except (IndexFileError, OSError) as exc:
                self._broken.add(shard)
                self._report(path, f"unreadable index ({exc})")
                continue
            self._broken.discard(shard)
            self._install(shard, records)

    def _read(self, location: Location, n_layers: int) -> Optional[np.ndarray]:
        itemsize = self.dtype.itemsize
        blocks = [n * itemsize for n in block_sizes(location.n_tokens, location.n_layers, self.width)]
        wanted = sum(blocks[:n_layers])
        if wanted == 0:
            return np.empty(0, dtype=self.dtype)
        problem, mapped = self._mapping(location.shard, location.offset + sum(blocks))
        if mapped is None:
            self._mark_bad(location, problem)
            return None
        start = location.offset
        with memoryview(mapped) as view:
            for size, crc in zip(blocks[:n_layers], location.crcs):
                if zlib.crc32(view[start : start + size]) != crc:
                    self._mark_bad(location, f"entry at byte {location.offset} fails its checksum")
                    return None
                start += size
        return np.frombuffer(mapped, dtype=self.dtype, count=wanted // itemsize, offset=location.offset).copy()

    def _mapping(self, shard: int, end: int) -> Tuple[str, Optional[mmap.mmap]]:
        """A read-only map of the shard covering bytes ``[0, end)``, or what is wrong with the file."""
        fd, mapped = self._maps.get(shard, (-1, None))
        if fd < 0:
            try:
                fd = os.open(self._path(shard, "bin"), os.O_RDONLY)
            except OSError as exc:
                return f"cannot open the shard ({exc.strerror})", None
            self._maps[shard] = (fd, None)
        size = os.fstat(fd).st_size
        if size < end:
            return f"truncated shard ({size} bytes, an entry ends at byte {end})", None
        if mapped is None or len(mapped) < end:
            mapped = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
            self._maps[shard] = (fd, mapped)
        return "", mapped

    def _install(self, shard: int, records: np.ndarray) -> None:
        """Make the records of a (re)loaded shard index visible; the newest copy of a key wins."""
        old = self._records.get(shard)
        if old is not None and len(old) <= len(records) and old.tobytes() == records[: len(old)].tobytes():
            new = records[len(old) :]
        else:
            self._forget(shard)
            new = records
        self._records[shard] = records
        keys = new["key"].tobytes()
        columns = zip(new["offset"].tolist(), new["n_tokens"].tolist(), new["n_layers"].tolist(), new["crc"].tolist())
        for i, (offset, n_tokens, n_layers, crcs) in enumerate(columns):
            key = keys[16 * i : 16 * i + 16]
            current = self._entries.get(key)
            if current is None or current.shard <= shard:
                self._entries[key] = Location(shard, offset, n_tokens, n_layers, tuple(crcs[:n_layers]))

    def _forget(self, shard: int) -> None:
        for key in [k for k, location in self._entries.items() if location.shard == shard]:
            del self._entries[key]
        self._records.pop(shard, None)

    # ----------------------------------------------------------------------------------- writing
    def put_many(self, entries: Sequence[NewEntry]) -> int:
        """Append the entries the disk lacks (or holds with fewer layers); returns how many were written.

        Does nothing once :attr:`write_error` is set (a previous write failed).
        """
        if self.write_error is not None or not entries:
            return 0
        try:
            with self._writer_lock():
                self.refresh()
                self._repair_broken()
                self._remove_stale_temporaries()
                todo: Dict[bytes, NewEntry] = {}
                for entry in entries:
                    best = max(self.layers_of(entry.key), todo[entry.key].n_layers if entry.key in todo else 0)
                    if entry.n_layers > best:
                        todo[entry.key] = entry
                if todo:
                    self._append(self._active_shard(), list(todo.values()))
                return len(todo)
        except OSError as exc:
            self._disable_writes(exc)
            return 0

    def _append(self, shard: int, entries: List[NewEntry]) -> None:
        """Write ``entries`` at the end of ``shard``, fsync, then publish them in the shard's index."""
        records = np.zeros(len(entries), dtype=record_dtype(self.n_layers_total))
        data_path = self._path(shard, "bin")
        fd = os.open(data_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            original_size = os.fstat(fd).st_size
            position = max(original_size, self._indexed_end(shard))
            try:
                for i, entry in enumerate(entries):
                    contiguous = np.ascontiguousarray(entry.flat, dtype=self.dtype)
                    # ndarray has the buffer protocol; numpy's stubs declare it only for Python >= 3.12
                    raw = memoryview(contiguous).cast("B")  # type: ignore[arg-type]
                    _fill_record(records, i, entry, position, self._block_crcs(raw, entry), self.dtype_name)
                    _write_all(fd, raw, position)
                    position += len(raw)
                os.fsync(fd)
                all_records = np.concatenate([self._records.get(shard, records[:0]), records])
                write_index(self._path(shard, "idx"), all_records, self.width, self.n_layers_total, self.dtype_name)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, original_size)
                raise
        finally:
            os.close(fd)
        self.refresh()

    def _block_crcs(self, raw: memoryview, entry: NewEntry) -> List[int]:
        crcs, start = [], 0
        for n in block_sizes(entry.n_tokens, entry.n_layers, self.width):
            size = n * self.dtype.itemsize
            crcs.append(zlib.crc32(raw[start : start + size]))
            start += size
        return crcs

    def _indexed_end(self, shard: int) -> int:
        """First byte after every entry the shard's index lists (0 for none)."""
        records = self._records.get(shard)
        if records is None or not len(records):
            return 0
        per_token = self.width // 2 + (records["n_layers"].astype(np.int64) - 1) * self.width
        ends = records["offset"].astype(np.int64) + records["n_tokens"] * per_token * self.dtype.itemsize
        return int(ends.max())

    def _active_shard(self) -> int:
        """The shard to append to: the newest one, or a new one once it is full."""
        numbers = [shard for shard, _ in self._files("bin")] + [shard for shard, _ in self._files("idx")]
        if not numbers:
            return 1
        newest = max(numbers)
        data_path = self._path(newest, "bin")
        size = data_path.stat().st_size if data_path.exists() else 0
        if size >= self.max_shard_bytes or len(self._records.get(newest, ())) >= self.max_shard_entries:
            return newest + 1
        return newest

    def _repair_broken(self) -> None:
        """Empty the shards whose index is unreadable (already reported), so that they can be reused."""
        if not self._broken:
            return
        for shard in sorted(self._broken):
            with open(self._path(shard, "bin"), "wb"):
                pass
            empty = np.zeros(0, dtype=record_dtype(self.n_layers_total))
            write_index(self._path(shard, "idx"), empty, self.width, self.n_layers_total, self.dtype_name)
            self._broken.discard(shard)
            self._forget(shard)
            self._signatures.pop(shard, None)
        self.refresh()

    def _remove_stale_temporaries(self) -> None:
        """Temporary index files are only written under the lock: any seen while holding it is left by a crash."""
        for path in self.directory.glob(".shard-*.idx.*.tmp"):
            path.unlink(missing_ok=True)

    @contextlib.contextmanager
    def _writer_lock(self) -> Iterator[None]:
        fd = os.open(self.directory / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _disable_writes(self, exc: OSError) -> None:
        reason = "the disk is full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "write failed"
        self.write_error = (
            f"cannot write to the ELMo layer cache in {self.directory}: {reason} ({exc}); "
            "new entries are kept in memory only, the entries already on disk stay valid"
        )
        warnings.warn(self.write_error, LayerCacheWarning, stacklevel=4)

    # ----------------------------------------------------------------------------------- files
    def close(self) -> None:
        """Unmap and close the shard files (the tier must not be used afterwards)."""
        for fd, mapped in self._maps.values():
            if mapped is not None:
                mapped.close()
            os.close(fd)
        self._maps.clear()

    def _path(self, shard: int, kind: str) -> Path:
        return self.directory / f"shard-{shard:06d}.{kind}"

    def _files(self, kind: str) -> List[Tuple[int, Path]]:
        found = []
        for path in self.directory.iterdir():
            match = SHARD_FILE.fullmatch(path.name)
            if match and match.group(2) == kind:
                found.append((int(match.group(1)), path))
        return sorted(found)

    def _mark_bad(self, location: Location, problem: str) -> None:
        self._bad.add(location)
        self.corrupt_entries += 1
        self._report(self._path(location.shard, "bin"), problem)

    def _report(self, path: Path, problem: str) -> None:
        """Warn once per file; the caller treats the affected entries as missing."""
        if path in self._reported:
            return
        self._reported.add(path)
        warnings.warn(
            f"ELMo layer cache file {path}: {problem}; its entries are treated as missing and recomputed",
            LayerCacheWarning,
            stacklevel=4,
        )


def _fill_record(records: np.ndarray, i: int, entry: NewEntry, offset: int, crcs: List[int], dtype_name: str) -> None:
    records["key"][i] = np.void(entry.key)
    records["offset"][i] = offset
    records["n_tokens"][i] = entry.n_tokens
    records["n_layers"][i] = entry.n_layers
    records["dtype"][i] = DTYPE_CODES[dtype_name]
    records["crc"][i, : len(crcs)] = crcs


def _write_all(fd: int, data: memoryview, offset: int) -> None:
    """``pwrite`` all of ``data`` at ``offset`` (a full disk raises ``OSError(ENOSPC)``)."""
    while len(data):
        written = os.pwrite(fd, data, offset)
        data, offset = data[written:], offset + written
