"""HdrHistogram's V1 compressed encoding: the interval-log payload every Java HdrHistogram
reads, YCSB's own 2.1.4 included.

The ``hdrh`` package encodes in V2 (cookie ``0x1c849304``, LEB128 counts), which Java
HdrHistogram reads only from 2.1.5 on; 2.1.4 rejects it with "The buffer does not contain a
compressed Histogram".  V1 is what 2.1.4 writes and reads, and what later versions still read:

- uncompressed: cookie ``0x1c849301 + (8 << 4)`` (8-byte counts), payload length, normalizing
  index offset (0), significant digits, lowest discernible value, highest trackable value (all
  big-endian ints/longs), the integer-to-double ratio (a double), then the counts array, one
  big-endian long per bucket, up to the last non-zero one;
- compressed: cookie ``0x1c849302 + (8 << 4)``, the compressed length, then the uncompressed
  encoding deflated in zlib's format (Java's ``Deflater``); the log line holds it in base64.

The counts array's layout is the same in ``hdrh`` and Java (same bucket arithmetic, no
normalizing offset), so the counts are copied bucket for bucket: decoding gives back exactly
the histogram encoded.  :func:`decode` reads the format back (``hdrh`` itself cannot).
"""

from __future__ import annotations

import base64
import struct
import zlib

from hdrh.histogram import HdrHistogram

WORD = 8
ENCODING_COOKIE = 0x1C849301 + (WORD << 4)
COMPRESSED_COOKIE = 0x1C849302 + (WORD << 4)
_HEADER = struct.Struct(">iiiiqqd")
_COMPRESSED_HEADER = struct.Struct(">ii")


def encode(hist: HdrHistogram) -> str:
    """``hist`` as the base64 text of a V1 compressed histogram."""
    counts = hist.counts
    last = max((i for i in range(hist.counts_len) if counts[i]), default=-1)
    payload = struct.pack(f">{last + 1}q", *(counts[i] for i in range(last + 1)))
    raw = _HEADER.pack(ENCODING_COOKIE, len(payload), 0, hist.significant_figures,
                       hist.lowest_trackable_value, hist.highest_trackable_value,
                       1.0) + payload
    packed = zlib.compress(raw)
    return base64.b64encode(_COMPRESSED_HEADER.pack(COMPRESSED_COOKIE, len(packed))
                            + packed).decode("ascii")


def decode(text: str) -> HdrHistogram:
    """The histogram of a V1 compressed base64 ``text`` (:func:`encode`'s inverse)."""
    data = base64.b64decode(text)
    cookie, length = _COMPRESSED_HEADER.unpack_from(data)
    if cookie != COMPRESSED_COOKIE:
        raise ValueError(f"not a V1 compressed histogram (cookie {cookie:#x})")
    raw = zlib.decompress(data[_COMPRESSED_HEADER.size:_COMPRESSED_HEADER.size + length])
    cookie, size, _offset, digits, lowest, highest, _ratio = _HEADER.unpack_from(raw)
    if cookie != ENCODING_COOKIE:
        raise ValueError(f"not a V1 histogram (cookie {cookie:#x})")
    hist = HdrHistogram(lowest, highest, digits)
    for index, count in enumerate(struct.unpack_from(f">{size // WORD}q", raw, _HEADER.size)):
        if count:
            hist.record_value(hist.get_value_from_index(index), count)
    return hist
