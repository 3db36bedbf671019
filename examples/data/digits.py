#!/usr/bin/python3
"""scikit-learn's handwritten digits as a kpipe dataset: 1797 images of 8 x 8
pixels (64 features, 10 classes), split 80/20 with a fixed seed (stratified),
features standardised with the mean and deviation of the training split.

    apt-get install -y python3-sklearn
    /usr/bin/python3 examples/data/digits.py digits.h5
"""
import argparse
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import kpipe_dataset  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", help="the HDF5 file to write, e.g. digits.h5")
    parser.add_argument("--seed", type=int, default=0, help="seed of the train/test split (default 0)")
    args = parser.parse_args()
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError:
        sys.exit("scikit-learn is missing: apt-get install -y python3-sklearn, and run with /usr/bin/python3")
    digits = load_digits()
    train_x, test_x, train_y, test_y = train_test_split(digits.data, digits.target, test_size=0.2,
                                                        random_state=args.seed, stratify=digits.target)
    mean = train_x.mean(axis=0)
    std = train_x.std(axis=0)
    std[std == 0] = 1.0  # pixels that are always blank stay 0
    kpipe_dataset.write(args.output, (train_x - mean) / std, train_y, (test_x - mean) / std, test_y,
                        classes=10, source=f"scikit-learn digits, 80/20 split with seed {args.seed}")


if __name__ == "__main__":
    main()
