#!/usr/bin/python3
"""Regenerates the SentencePiece model files of the bad-input CLI tests and
test_sentencepiece_model (tests/cli/bad_inputs.txt, "SentencePiece").

Run from the repository root with any python3 (no packages needed):
  python3 tests/data/sentencepiece/make.py
Each file is tests/data/lm/genesis-bpe.model with one thing damaged, edited
in protobuf's wire format (sentencepiece_model.proto's field numbers). The
character maps are built by hand in darts-clone's double-array layout: one
valid map that folds "A" to "a" (fold-a.model, which kpipe must accept and
the library must apply) and damaged ones whose offsets lead outside the map,
which make the library read wild memory on the first text it normalises.
"""
import pathlib
import struct

HERE = pathlib.Path(__file__).resolve().parent
BASE = HERE.parent / "lm" / "genesis-bpe.model"

VARINT, LENGTH = 0, 2
PIECES, TRAINER_SPEC, NORMALIZER_SPEC, DENORMALIZER_SPEC = 1, 2, 3, 5
PIECE_TEXT, PIECE_TYPE = 1, 3
MODEL_TYPE, UNK_ID, BOS_ID, EOS_ID, PAD_ID = 3, 40, 41, 42, 43
CHARSMAP = 2


def varint(value):
    value &= (1 << 64) - 1  # negative int32s are ten-byte varints
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number, wire_type, value):
    key = varint(number << 3 | wire_type)
    if wire_type == VARINT:
        return key + varint(value)
    if wire_type == LENGTH:
        return key + varint(len(value)) + value
    return key + value  # fixed 32 or 64 bits


def fields(message):
    """(number, wire type, value) of each field: an int for varints, bytes otherwise."""
    out, at = [], 0
    while at < len(message):
        key, at = read_varint(message, at)
        number, wire_type = key >> 3, key & 7
        if wire_type == VARINT:
            value, at = read_varint(message, at)
        elif wire_type == LENGTH:
            size, at = read_varint(message, at)
            value, at = message[at:at + size], at + size
        else:
            size = 8 if wire_type == 1 else 4
            value, at = message[at:at + size], at + size
        out.append((number, wire_type, value))
    return out


def read_varint(message, at):
    value, shift = 0, 0
    while True:
        byte = message[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def encode(items):
    return b"".join(field(n, t, v) for n, t, v in items)


MODEL = fields(BASE.read_bytes())
# The last piece is a normal one (the first are <unk>, the controls and the 256 byte pieces).
LAST = sum(1 for number, _, _ in MODEL if number == PIECES) - 1


def write(name, items):
    (HERE / name).write_bytes(encode(items) if isinstance(items, list) else items)


def with_piece(index, edit):
    """The model with piece `index`'s fields passed through `edit`."""
    out, seen = [], 0
    for number, wire_type, value in MODEL:
        if number == PIECES:
            if seen == index:
                value = encode(edit(fields(value)))
            seen += 1
        out.append((number, wire_type, value))
    return out


def with_message(target, edit):
    """The model with message field `target` passed through `edit` (added when absent)."""
    out, found = [], False
    for number, wire_type, value in MODEL:
        if number == target:
            value, found = encode(edit(fields(value))), True
        out.append((number, wire_type, value))
    if not found:
        out.append((target, LENGTH, encode(edit([]))))
    return out


def piece_text(index):
    piece = [value for number, _, value in MODEL if number == PIECES][index]
    return next(value for number, _, value in fields(piece) if number == PIECE_TEXT)


def set_scalar(number, value):
    return lambda items: [item for item in items if item[0] != number] + [(number, VARINT, value)]


def set_bytes(number, value):
    return lambda items: [item for item in items if item[0] != number] + [(number, LENGTH, value)]


def unit(offset=0, label=0, leaf=False):
    """A darts-clone unit leading to `offset` (XOR), labelled `label`."""
    assert offset < 1 << 21
    return offset << 10 | (1 << 8 if leaf else 0) | label


def extended_unit(offset):
    """A unit whose offset is (offset << 8): bit 9 set, up to 2^30."""
    return offset << 10 | 1 << 9


def value_unit(value):
    return 1 << 31 | value


def charsmap(units, replacements, trie_bytes=None):
    trie = b"".join(struct.pack("<I", u) for u in units)
    size = len(trie) if trie_bytes is None else trie_bytes
    return struct.pack("<I", size) + trie + replacements


def fold_a(root=None, a_unit=None, leaf=None):
    """768 units: the root's base is 256, "A" is unit 256 ^ 0x41 = 321, whose
    leaf is unit 321 ^ 833 = 512, whose value is replacement 0, "a"."""
    units = [0] * 768
    units[0] = unit(256) if root is None else root
    units[321] = unit(321 ^ 512, ord("A"), leaf=True) if a_unit is None else a_unit
    units[512] = value_unit(0) if leaf is None else leaf
    return charsmap(units, b"a\0")


def main():
    normalizer = lambda blob: with_message(NORMALIZER_SPEC, set_bytes(CHARSMAP, blob))
    write("fold-a.model", normalizer(fold_a()))

    model = encode(MODEL)
    write("truncated.model", model[: len(model) // 2])
    write("wire-type-7.model", model + bytes([PIECES << 3 | 7]))
    write("varint-eleven-bytes.model", model + bytes([PIECES << 3 | VARINT]) + b"\xff" * 10 + b"\x01")
    write("length-past-end.model", model + bytes([PIECES << 3 | LENGTH]) + varint(1 << 20) + b"abc")
    write("field-number-0.model", bytes([0 << 3 | VARINT, 1]) + model)
    write("no-pieces.model", [item for item in MODEL if item[0] != PIECES])
    write("empty-piece.model", with_piece(LAST, set_bytes(PIECE_TEXT, b"")))
    write("piece-not-utf8.model", with_piece(LAST, set_bytes(PIECE_TEXT, b"\xff\xfeab")))
    write("piece-surrogate.model", with_piece(LAST, set_bytes(PIECE_TEXT, "\ud800".encode("utf-8", "surrogatepass"))))
    write("piece-nul.model", with_piece(LAST, set_bytes(PIECE_TEXT, b"a\0b")))
    write("piece-type-99.model", with_piece(LAST, set_scalar(PIECE_TYPE, 99)))
    write("piece-type-0.model", with_piece(LAST, set_scalar(PIECE_TYPE, 0)))
    write("duplicate-piece.model", with_piece(LAST, set_bytes(PIECE_TEXT, piece_text(LAST - 1))))
    write("no-unknown-piece.model", with_piece(0, set_scalar(PIECE_TYPE, 1)))
    write("model-type-7.model", with_message(TRAINER_SPEC, set_scalar(MODEL_TYPE, 7)))
    write("model-type-0.model", with_message(TRAINER_SPEC, set_scalar(MODEL_TYPE, 0)))
    write("unk-id-5000.model", with_message(TRAINER_SPEC, set_scalar(UNK_ID, 5000)))
    write("unk-id-minus-1.model", with_message(TRAINER_SPEC, set_scalar(UNK_ID, -1)))
    write("unk-id-names-a-normal-piece.model", with_message(TRAINER_SPEC, set_scalar(UNK_ID, 7)))
    write("bos-id-100000.model", with_message(TRAINER_SPEC, set_scalar(BOS_ID, 100000)))
    write("eos-id-minus-5.model", with_message(TRAINER_SPEC, set_scalar(EOS_ID, -5)))
    write("pad-id-2p31.model", with_message(TRAINER_SPEC, set_scalar(PAD_ID, 2**31 - 1)))
    write("trainer-spec-twice.model", MODEL + [(TRAINER_SPEC, LENGTH, encode([(UNK_ID, VARINT, 999)]))])

    write("charsmap-3-bytes.model", normalizer(b"\x01\x02\x03"))
    write("charsmap-trie-past-end.model", normalizer(fold_a()[:4] + b"\0" * 8 + b"a\0"))
    write("charsmap-trie-size-2p32.model", normalizer(charsmap([unit(256)], b"a\0", trie_bytes=2**32 - 1)))
    write("charsmap-trie-empty.model", normalizer(charsmap([], b"a\0")))
    write("charsmap-root-past-end.model", normalizer(fold_a(root=extended_unit(0x3FFFFF))))
    write("charsmap-root-one-block-past-end.model", normalizer(fold_a(root=unit(768))))
    write("charsmap-state-past-end.model", normalizer(fold_a(a_unit=unit(321 ^ 0x10000, ord("A")))))
    write("charsmap-leaf-past-end.model", normalizer(fold_a(a_unit=unit(321 ^ 5000, ord("A"), leaf=True))))
    write("charsmap-replacement-past-end.model", normalizer(fold_a(leaf=value_unit(100))))
    write("charsmap-replacement-2p31.model", normalizer(fold_a(leaf=value_unit(2**31 - 1))))
    write("charsmap-second-map-damaged.model",
          normalizer(fold_a()) + [(NORMALIZER_SPEC, LENGTH, encode([(CHARSMAP, LENGTH, fold_a(root=unit(4096)))]))])
    write("denormalizer-root-past-end.model",
          with_message(DENORMALIZER_SPEC, set_bytes(CHARSMAP, fold_a(root=extended_unit(0x3FFFFF)))))


if __name__ == "__main__":
    main()
