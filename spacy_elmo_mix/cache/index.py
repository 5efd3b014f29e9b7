"""Per-shard index files of the disk cache: which entries a shard holds, where, and their checksums.

``shard-NNNNNN.idx`` describes ``shard-NNNNNN.bin``. Layout (little-endian):

    header  magic b"ELMOLCI1", width u32, n_layers_total u32, dtype code u32, reserved u32,
            record count u64, blake2b-16 digest of the records
    records one per entry, in the order they were appended:
            key (16 bytes), offset u64 (bytes into the shard), n_tokens u32, n_layers u16,
            dtype code u8, 1 spare byte, crc32 u32 per stored block (n_layers_total of them;
            unused ones are 0)

An index is only ever replaced whole (temporary file, fsync, rename), so readers see the old or the
new version, never a mix. A shard's index lists only entries whose bytes were written and synced.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import numpy as np

from ..atomic import atomic_write

MAGIC = b"ELMOLCI1"
HEADER = struct.Struct("<8sIIIIQ16s")
DTYPE_CODES = {"float16": 1, "float32": 2}


class IndexFileError(ValueError):
    """An index file is truncated, corrupted or of another format."""


def record_dtype(n_layers_total: int) -> np.dtype:
    """The structured dtype of one index record for a model with ``n_layers_total`` ELMo layers."""
    return np.dtype(
        [
            ("key", "V16"),
            ("offset", "<u8"),
            ("n_tokens", "<u4"),
            ("n_layers", "<u2"),
            ("dtype", "u1"),
            ("spare", "u1"),
            ("crc", "<u4", (n_layers_total,)),
        ]
    )


def read_index(path: Path, width: int, n_layers_total: int, dtype_name: str) -> np.ndarray:
    """The records of the index file ``path``; raises :class:`IndexFileError` saying what is wrong.

    width, n_layers_total, dtype_name: what the cache expects; an index written for other values is
    reported as an error rather than misread.
    """
    data = path.read_bytes()
    if len(data) < HEADER.size:
        raise IndexFileError(f"truncated index ({len(data)} bytes, the header alone is {HEADER.size})")
    magic, file_width, file_layers, code, _, count, digest = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise IndexFileError("not a layer-cache index (bad magic bytes)")
    expected = (width, n_layers_total, DTYPE_CODES[dtype_name])
    if (file_width, file_layers, code) != expected:
        raise IndexFileError(
            f"index is for width {file_width}, {file_layers} layers, dtype code {code}; expected {expected}"
        )
    body = data[HEADER.size :]
    rtype = record_dtype(n_layers_total)
    if len(body) != count * rtype.itemsize:
        raise IndexFileError(f"truncated index ({len(body)} record bytes for {count} records)")
    if hashlib.blake2b(body, digest_size=16).digest() != digest:
        raise IndexFileError("index checksum mismatch")
    return np.frombuffer(body, dtype=rtype).copy()


def write_index(path: Path, records: np.ndarray, width: int, n_layers_total: int, dtype_name: str) -> None:
    """Atomically replace ``path`` with an index of ``records`` (temporary file, fsync, rename).

    On an error (a full disk included) the temporary file is removed, the old index is left as it
    was, and the ``OSError`` propagates; once the rename is done, the function no longer raises.
    """
    body = records.tobytes()
    header = HEADER.pack(
        MAGIC,
        width,
        n_layers_total,
        DTYPE_CODES[dtype_name],
        0,
        len(records),
        hashlib.blake2b(body, digest_size=16).digest(),
    )
    with atomic_write(path, durable=True) as tmp:
        with open(tmp, "wb") as handle:
            handle.write(header)
            handle.write(body)
