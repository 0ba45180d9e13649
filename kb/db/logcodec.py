"""How a stored log is compressed. New logs are zstd at fast level -3: a megabyte of
vLLM log text costs ~1.0 ms and compresses to ~7% (level 1: ~1.4 ms for ~6%; gzip
level 1: ~2.6 ms for ~9%), and the compressor releases the GIL. Every upload pays this
on the request path, so speed wins over the last percent of size. Logs stored before
migration 0003 are gzip; the first bytes tell the two apart, so both read back."""

from __future__ import annotations

import gzip
import io
import threading
from collections.abc import Iterator

import zstandard

from kb.core.analyze import GZIP_MAGIC

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
ZSTD_LEVEL = -3

_THREAD = threading.local()  # zstd contexts are not thread-safe: one per thread


def _compressor() -> zstandard.ZstdCompressor:
    compressor = getattr(_THREAD, "compressor", None)
    if compressor is None:
        compressor = _THREAD.compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
    return compressor


def compress_log(text: bytes) -> bytes:
    return _compressor().compress(text)


def decompress_log(blob: bytes) -> bytes:
    """The log text of a stored blob, zstd or gzip (older rows)."""
    blob = bytes(blob)
    if blob.startswith(ZSTD_MAGIC):
        # decompressobj: a log compressed as it streamed in (kb.services.streamupload)
        # has no content size in its frame header, which decompress() needs
        return zstandard.ZstdDecompressor().decompressobj().decompress(blob)
    if blob.startswith(GZIP_MAGIC):
        return gzip.decompress(blob)
    raise ValueError("stored log is neither zstd nor gzip")


def decompressed_pieces(blob: bytes, size: int = 1 << 20) -> Iterator[bytes]:
    """The log text of a stored blob, `size` bytes at a time (a large log is never whole)."""
    if bytes(blob[:4]) == ZSTD_MAGIC:
        reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(blob))
    elif bytes(blob[:2]) == GZIP_MAGIC:
        reader = gzip.GzipFile(fileobj=io.BytesIO(blob))
    else:
        raise ValueError("stored log is neither zstd nor gzip")
    with reader:
        while piece := reader.read(size):
            yield piece
