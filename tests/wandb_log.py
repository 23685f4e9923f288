"""Read the records of an offline W&B run file (``run-*.wandb``), for the tests.

The file is a LevelDB-style log (a 7-byte header ``:W&B``, magic, version; then 32 KiB blocks of
chunks with a 7-byte header: crc32, length, type FULL/FIRST/MIDDLE/LAST) of ``Record`` protobufs.
"""
import struct

from wandb.proto import wandb_internal_pb2

BLOCK = 32768
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path):
    data = open(path, "rb").read()
    ident, magic, version = struct.unpack("<4sHB", data[:7])
    assert ident == b":W&B" and magic == 0xBEE1, "not a W&B run file"
    pos, pending = 7, b""
    while pos + 7 <= len(data):
        if BLOCK - pos % BLOCK < 7:  # block trailer padding
            pos += BLOCK - pos % BLOCK
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind in (FULL, FIRST):
            pending = chunk
        else:
            pending += chunk
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record


def config_and_summary(path) -> tuple[dict, dict]:
    """The run's config keys and its final summary (JSON-encoded values), merged over updates."""
    config, summary = {}, {}
    for record in records(path):
        kind = record.WhichOneof("record_type")
        if kind == "config":
            config.update({item.key: item.value_json for item in record.config.update})
        elif kind == "summary":
            summary.update({item.key: item.value_json for item in record.summary.update})
    return config, summary
