#!/usr/bin/python3
"""Regenerates the hostile HDF5 inputs of the bad-input CLI tests (tests/cli/bad_inputs.txt).

Run from the repository root with Debian's python (h5py, numpy):
  /usr/bin/python3 tests/data/hostile/make.py
Each file is a few KB but declares far more than it stores: dimensions of
2^32 + n (which wrap in 32 bits), shells of never-written chunks, counts and
attributes out of range. kpipe must refuse each in one line before it
allocates what the file declares.
"""
import pathlib
import shutil

import h5py
import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent.parent


def dataset(name, train_x_shape, train_y_shape, y_dtype=np.int32, classes=3, labels=None):
    """A kpipe dataset whose train split declares the given shapes in chunked, unwritten storage."""
    with h5py.File(HERE / name, "w") as f:
        f.attrs["format"] = np.bytes_("kpipe-dataset")
        f.attrs["format_version"] = np.int64(1)
        if classes is not None:
            f.attrs["classes"] = np.int64(classes)
        train = f.create_group("train")
        train.create_dataset("x", shape=train_x_shape, dtype=np.float32, chunks=(1, min(train_x_shape[1], 1024)))
        train.create_dataset("y", shape=train_y_shape, dtype=y_dtype, chunks=(1,) * len(train_y_shape))
        test = f.create_group("test")
        test.create_dataset("x", data=np.zeros((8, train_x_shape[1] if train_x_shape[1] < 1 << 20 else 4), np.float32))
        test.create_dataset("y", data=labels if labels is not None else np.zeros(8, y_dtype))


dataset("rows-2p32.h5", (2**32 + 3, 4), (2**32 + 3,))
dataset("features-2p32.h5", (16, 2**32 + 4), (16,))
dataset("rows-2p28.h5", (2**28, 4), (2**28,))
# Regression targets (float32, N x T) declaring 2^32 + 3 rows against 16 samples.
dataset("targets-2p32.h5", (16, 4), (2**32 + 3, 2), y_dtype=np.float32, classes=None)

# A class count of 2^32 + 3, which wraps to 3 in 32 bits, and a label of 10^6.
with h5py.File(HERE / "classes-2p32.h5", "w") as f:
    f.attrs["format"] = np.bytes_("kpipe-dataset")
    f.attrs["format_version"] = np.int64(1)
    f.attrs["classes"] = np.int64(2**32 + 3)
    for split in ("train", "test"):
        group = f.create_group(split)
        group.create_dataset("x", data=np.zeros((8, 4), np.float32))
        group.create_dataset("y", data=np.array([0, 1, 2, 10**6, 0, 1, 2, 0], np.int32))

# A token stream declaring 2^30 tokens it does not store.
with h5py.File(HERE / "tokens-2p30.h5", "w") as f:
    f.attrs["format"] = np.bytes_("kpipe-dataset")
    f.attrs["format_version"] = np.int64(1)
    f.attrs["vocabulary"] = np.bytes_("abc")
    for split in ("train", "test"):
        f.create_group(split).create_dataset("tokens", shape=(2**30,), dtype=np.int32, chunks=(4096,))

# Checkpoints whose step attribute is out of range (a copy of the committed good one).
for name, step in (("step-negative.h5", -5), ("step-2p32.h5", 2**32 + 1), ("step-int64-min.h5", -2**63)):
    shutil.copy(ROOT / "tests/data/checkpoints/good.h5", HERE / name)
    with h5py.File(HERE / name, "r+") as f:
        f.attrs["step"] = np.int64(step)

# A checkpoint whose parameter is an external link to a FIFO (reading it would block).
shutil.copy(ROOT / "tests/data/checkpoints/good.h5", HERE / "checkpoint-external-link.h5")
with h5py.File(HERE / "checkpoint-external-link.h5", "r+") as f:
    del f["parameters/layer0.weight"]
    f["parameters/layer0.weight"] = h5py.ExternalLink("/tmp/kpipe-fifo", "/w")

# A checkpoint whose step was moved forward within range (and its data cursor
# with it): the root attributes no longer match their checksum.
shutil.copy(ROOT / "tests/data/checkpoints/good.h5", HERE / "altered-step.h5")
with h5py.File(HERE / "altered-step.h5", "r+") as f:
    f.attrs["step"] = np.int64(7)
    f.attrs["data_cursor"] = np.int64(7)

def patch(path, old, new, times=1):
    """Replaces the `times` occurrences of bytes `old` in file `path` by `new` (of the same length)."""
    data = path.read_bytes()
    assert len(old) == len(new) and data.count(old) == times, f"{path.name}: {old!r} is not found {times} times"
    path.write_bytes(data.replace(old, new))


# Checkpoints whose attributes declare far more than the file holds: the
# deck's fixed-size string type claims 100 MiB, and a 1234-element step
# attribute claims 2^31 (16 GiB) and 2^57 (2^60 bytes) elements. The header
# bytes are patched after h5py wrote them (version-1 headers carry no checksum).
shutil.copy(ROOT / "tests/data/checkpoints/good.h5", HERE / "deck-100mib.h5")
with h5py.File(HERE / "deck-100mib.h5", "r") as f:
    deck_bytes = f.attrs.get_id("deck").dtype.itemsize
patch(HERE / "deck-100mib.h5", b"\x13\x00\x00\x00" + deck_bytes.to_bytes(4, "little"),
      b"\x13\x00\x00\x00" + (100 << 20).to_bytes(4, "little"))
for name, count in (("attribute-16gib.h5", 2**31), ("attribute-2p60.h5", 2**57)):
    shutil.copy(ROOT / "tests/data/checkpoints/good.h5", HERE / name)
    with h5py.File(HERE / name, "r+") as f:
        del f.attrs["step"]
        f.attrs["step"] = np.zeros(1234, dtype=np.int64)
    patch(HERE / name, (1234).to_bytes(8, "little"), count.to_bytes(8, "little"), times=2)  # size and maximum
# A deck attribute holding three strings where kpipe reads one.
shutil.copy(ROOT / "tests/data/checkpoints/good.h5", HERE / "deck-array.h5")
with h5py.File(HERE / "deck-array.h5", "r+") as f:
    deck = f.attrs["deck"]
    del f.attrs["deck"]
    f.attrs["deck"] = np.array([deck] * 3)

# Profiles (from the committed good one, `kpipe run inputs/quickstart.toml
# pipeline.stages=1 train.steps=2 --profile tests/data/profiles/good.h5`):
# an infinite, a huge and a NaN time, and a table declaring 2^25 rows it does not store.
for name, value in (("profile-inf.h5", np.inf), ("profile-1e308.h5", 1e308), ("profile-nan.h5", np.nan)):
    shutil.copy(ROOT / "tests/data/profiles/good.h5", HERE / name)
    with h5py.File(HERE / name, "r+") as f:
        end = f["measured/end"][...]
        end[3] = value
        f["measured/end"][...] = end
shutil.copy(ROOT / "tests/data/profiles/good.h5", HERE / "profile-2p25.h5")
with h5py.File(HERE / "profile-2p25.h5", "r+") as f:
    del f["measured/start"]
    f["measured"].create_dataset("start", shape=(2**25,), dtype=np.float64, chunks=(4096,))

# Links out of the file: a dataset whose /train/x is an external link to a
# FIFO's path, one whose /train is a soft link, and a virtual /train/x that
# maps another file. kpipe follows no link and reads no virtual dataset.
for name, make_link in (
    ("external-link.h5", lambda f: f.__setitem__("train/x", h5py.ExternalLink("/tmp/kpipe-fifo", "/x"))),
    ("soft-link.h5", lambda f: f.__setitem__("train", h5py.SoftLink("/test"))),
):
    with h5py.File(HERE / name, "w") as f:
        f.attrs["format"] = np.bytes_("kpipe-dataset")
        f.attrs["format_version"] = np.int64(1)
        f.attrs["classes"] = np.int64(3)
        test = f.create_group("test")
        test.create_dataset("x", data=np.zeros((8, 4), np.float32))
        test.create_dataset("y", data=np.zeros(8, np.int32))
        if name == "external-link.h5":
            f.create_group("train").create_dataset("y", data=np.zeros(8, np.int32))
        make_link(f)
with h5py.File(HERE / "virtual.h5", "w") as f:
    f.attrs["format"] = np.bytes_("kpipe-dataset")
    f.attrs["format_version"] = np.int64(1)
    f.attrs["classes"] = np.int64(3)
    layout = h5py.VirtualLayout(shape=(8, 4), dtype=np.float32)
    layout[:, :] = h5py.VirtualSource("/dev/zero", "x", shape=(8, 4))
    train = f.create_group("train")
    train.create_virtual_dataset("x", layout)
    train.create_dataset("y", data=np.zeros(8, np.int32))
    test = f.create_group("test")
    test.create_dataset("x", data=np.zeros((8, 4), np.float32))
    test.create_dataset("y", data=np.zeros(8, np.int32))

# A /train/x whose raw data lives outside the file (HDF5 external storage),
# in /dev/zero: kpipe reads only data stored in the file itself.
with h5py.File(HERE / "external-storage.h5", "w") as f:
    f.attrs["format"] = np.bytes_("kpipe-dataset")
    f.attrs["format_version"] = np.int64(1)
    f.attrs["classes"] = np.int64(3)
    train = f.create_group("train")
    train.create_dataset("x", shape=(8, 4), dtype=np.float32, external=[("/dev/zero", 0, 8 * 4 * 4)])
    train.create_dataset("y", data=np.zeros(8, np.int32))
    test = f.create_group("test")
    test.create_dataset("x", data=np.zeros((8, 4), np.float32))
    test.create_dataset("y", data=np.zeros(8, np.int32))
