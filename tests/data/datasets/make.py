#!/usr/bin/python3
"""Regenerates the small datasets of the bad-input CLI tests (tests/cli/bad_inputs.txt).

Run from anywhere with Debian's python (h5py, numpy): /usr/bin/python3 tests/data/datasets/make.py
Each file is a few KB; the layout is docs/formats.md, "Datasets".
"""
import pathlib

import h5py
import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
FEATURES, CLASSES = 4, 3


def write(name, train_x, train_y, test_x, test_y, classes=CLASSES):
    with h5py.File(HERE / name, "w") as f:
        f.attrs["format"] = np.bytes_("kpipe-dataset")
        f.attrs["format_version"] = np.int64(1)
        if classes is not None:
            f.attrs["classes"] = np.int64(classes)
        for split, x, y in (("train", train_x, train_y), ("test", test_x, test_y)):
            group = f.create_group(split)
            group.create_dataset("x", data=x)
            group.create_dataset("y", data=y)


rng = np.random.default_rng(7)
x = rng.standard_normal((24, FEATURES)).astype(np.float32)
y = (np.arange(24) % CLASSES).astype(np.int32)
write("good.h5", x[:16], y[:16], x[16:], y[16:])
write("wrong-shape.h5", x[:16, :, None].repeat(2, axis=2), y[:16], x[16:], y[16:])
bad_y = y.copy()
bad_y[5] = 7
write("label-out-of-range.h5", x[:16], bad_y[:16], x[16:], bad_y[16:])
write("empty.h5", x[:0], y[:0], x[16:], y[16:])
(HERE / "not-hdf5.h5").write_text("this is a text file, not an HDF5 dataset\n")
