#!/usr/bin/python3
"""Fashion-MNIST as a kpipe dataset: 60000 train / 10000 test images of 28 x 28
pixels, flattened to 784 float32 features scaled to [0, 1], 10 classes.

Reads the IDX files of Debian's dataset-fashion-mnist package:
    apt-get install -y dataset-fashion-mnist
    /usr/bin/python3 examples/data/fashion_mnist.py fashion_mnist.h5
"""
import argparse
import gzip
import pathlib
import struct
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import kpipe_dataset  # noqa: E402

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    """An IDX file (optionally gzipped) as a numpy array of its declared shape."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        zero, dtype_code, dims = struct.unpack(">HBB", f.read(4))
        if zero != 0 or dtype_code != 0x08:
            sys.exit(f"{path}: not an unsigned-byte IDX file")
        shape = struct.unpack(">" + "I" * dims, f.read(4 * dims))
        data = np.frombuffer(f.read(), dtype=np.uint8)
    if data.size != int(np.prod(shape)):
        sys.exit(f"{path}: {data.size} values, but the header says {shape}")
    return data.reshape(shape)


def find(directory, stem):
    for name in (f"{stem}.gz", stem):
        if (directory / name).exists():
            return directory / name
    sys.exit(f"no {stem}[.gz] in {directory}; install dataset-fashion-mnist or pass --idx-dir")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", help="the HDF5 file to write, e.g. fashion_mnist.h5")
    parser.add_argument("--idx-dir", default=DEFAULT_DIR, help=f"where the IDX files are (default {DEFAULT_DIR})")
    args = parser.parse_args()
    directory = pathlib.Path(args.idx_dir)
    splits = {}
    for split, prefix in (("train", "train"), ("test", "t10k")):
        images = read_idx(find(directory, f"{prefix}-images-idx3-ubyte"))
        labels = read_idx(find(directory, f"{prefix}-labels-idx1-ubyte"))
        x = images.reshape(len(images), -1).astype(np.float32) / 255.0
        splits[split] = (x, labels.astype(np.int32))
    kpipe_dataset.write(args.output, *splits["train"], *splits["test"], classes=10,
                        source="Fashion-MNIST (Zalando Research), Debian dataset-fashion-mnist")


if __name__ == "__main__":
    main()
