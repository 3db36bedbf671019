"""Writes a kpipe dataset (docs/formats.md, "Datasets") with h5py.

Shared by the converters in this folder; run them with Debian's python
(/usr/bin/python3), which has h5py and numpy as packages.
"""
import h5py
import numpy as np

FORMAT = "kpipe-dataset"
FORMAT_VERSION = 1


def write(path, train_x, train_y, test_x, test_y, classes, source):
    """Writes /train/x, /train/y, /test/x, /test/y and the root attributes.

    x: N x F float32 features; y: N int32 labels in [0, classes).
    """
    with h5py.File(path, "w") as f:
        # Fixed-length ASCII strings, as kpipe writes its own files.
        f.attrs["format"] = np.bytes_(FORMAT)
        f.attrs["format_version"] = np.int64(FORMAT_VERSION)
        f.attrs["classes"] = np.int64(classes)
        f.attrs["source"] = np.bytes_(source)
        for split, x, y in (("train", train_x, train_y), ("test", test_x, test_y)):
            group = f.create_group(split)
            group.create_dataset("x", data=np.ascontiguousarray(x, dtype=np.float32))
            group.create_dataset("y", data=np.ascontiguousarray(y, dtype=np.int32))
    print(f"{path}: {len(train_x)} train / {len(test_x)} test samples, "
          f"{train_x.shape[1]} features, {classes} classes")
