"""FsspecFS's read-ahead (ldpfuse_py.contrib.fsspec.ReadAhead), driven as the page cache
drives it, over an object held in memory whose ranged reads behave as S3's do (a range
that starts at or past the end is an error, 416)."""

import random

import pytest

from ldpfuse_py.contrib.fsspec import ReadAhead

MIB = 1 << 20


class Object:
    """An object store's ranged GET over bytes, counting requests."""

    def __init__(self, data):
        self.data = data
        self.requests = []

    def fetch(self, start, end):
        if start >= len(self.data):
            raise OSError(22, "InvalidRange (416)")
        self.requests.append((start, end))
        return self.data[start:end]


def read_all(ra, obj, chunk):
    out, offset = [], 0
    while True:
        try:
            got = ra.read(obj.fetch, chunk, offset)
        except OSError:
            break                            # at the end: FsspecFS turns this into b""
        if not got:
            break
        out.append(got)
        offset += len(got)
    return b"".join(out)


# (3 MiB + 1) + 8 + 16 + 32 MiB: the first read, then windows of 8, 16 and 32 MiB, the
# last of which ends exactly at the object's end; a read of 3 MiB + 1 spans that end
# (its second half is past it: a 416 to absorb, not an error for the program)
@pytest.mark.parametrize("size,chunk", [(59 * MIB + 1, 3 * MIB + 1), (57 * MIB, MIB),
                                        (40 * MIB + 12345, MIB), (3 * MIB, 128 * 1024)])
def test_sequential_reads_get_every_byte_in_few_growing_requests(size, chunk):
    data = random.Random(size).randbytes(size)
    obj = Object(data)
    ra = ReadAhead(64 * MIB)
    assert read_all(ra, obj, chunk) == data
    lengths = [end - start for start, end in obj.requests]
    assert len(obj.requests) <= 6, lengths
    assert lengths[1:4] == sorted(lengths[1:4])          # the window grows


def test_random_reads_fetch_exactly_what_is_asked():
    data = random.Random(1).randbytes(16 * MIB)
    obj = Object(data)
    ra = ReadAhead(64 * MIB)
    rng = random.Random(2)
    for _ in range(50):
        off = rng.randrange(0, len(data) - 128 * 1024)
        assert ra.read(obj.fetch, 128 * 1024, off) == data[off:off + 128 * 1024]
    assert all(end - start == 128 * 1024 for start, end in obj.requests)


def test_readahead_zero_turns_it_off():
    data = bytes(range(256)) * 40000
    obj = Object(data)
    ra = ReadAhead(0)
    assert read_all(ra, obj, 64 * 1024) == data
    assert all(end - start == 64 * 1024 for start, end in obj.requests)
