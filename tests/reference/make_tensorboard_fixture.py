#!/usr/bin/python3
"""Writes tests/data/tensorboard/events.golden: a TensorBoard event file made with
Google's protobuf library (Debian's python3-protobuf) from the field numbers of
tensorboard/compat/proto/event.proto and summary.proto, framed as TFRecord with
a bit-by-bit CRC-32C. cmha's writer (framework/run/tensorboard.cpp, table
driven) must produce the same bytes for the same events. CI only reads the file.

Run: /usr/bin/python3 tests/reference/make_tensorboard_fixture.py
"""
import os
import struct

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "tensorboard", "events.golden")

F = descriptor_pb2.FieldDescriptorProto


def field(msg, name, number, ftype, label=F.LABEL_OPTIONAL, type_name=None):
    f = msg.field.add(name=name, number=number, type=ftype, label=label)
    if type_name:
        f.type_name = type_name


def event_class():
    fd = descriptor_pb2.FileDescriptorProto(name="cmha_tb.proto", package="tensorboard", syntax="proto3")
    value = fd.message_type.add(name="Value")  # tensorboard.Summary.Value, flattened
    field(value, "tag", 1, F.TYPE_STRING)
    field(value, "simple_value", 2, F.TYPE_FLOAT)
    summary = fd.message_type.add(name="Summary")
    field(summary, "value", 1, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".tensorboard.Value")
    event = fd.message_type.add(name="Event")
    field(event, "wall_time", 1, F.TYPE_DOUBLE)
    field(event, "step", 2, F.TYPE_INT64)
    field(event, "file_version", 3, F.TYPE_STRING)
    field(event, "summary", 5, F.TYPE_MESSAGE, type_name=".tensorboard.Summary")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName("tensorboard.Event"))


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data):
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked(length)) + data + struct.pack("<I", masked(data))


def main():
    assert crc32c(b"123456789") == 0xE3069283
    Event = event_class()
    events = [Event(wall_time=1700000000.25, file_version="brain.Event:2")]
    # The same events as tests/unit/tensorboard_test.cpp writes.
    for step, wall, values in [(0, 1700000001.5, [("train/loss", 9.125)]),
                               (42, 1700000002.75, [("train/loss", 2.25), ("train/lr", 0.0005)]),
                               (1000, 1700000003.0, [("valid/bleu", 21.5), ("valid/loss", -1.0)])]:
        e = Event(wall_time=wall, step=step)
        for tag, v in values:
            e.summary.value.add(tag=tag, simple_value=v)
        events.append(e)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "wb") as f:
        for e in events:
            f.write(record(e.SerializeToString()))
    print("wrote", os.path.normpath(OUT))


if __name__ == "__main__":
    main()
