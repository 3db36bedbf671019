#!/usr/bin/env bash
# Regenerates the committed test checkpoints from tiny.toml (run from the
# repository root after a change of the checkpoint layout):
#   tests/data/checkpoints/make.sh build/src/app/kpipe
#   good.h5       after 1 step of tiny.toml
#   truncated.h5  good.h5 cut in half
#   flipped.h5    good.h5 with one byte of /parameters/layer0.weight's data flipped
#   not-hdf5.h5   a text file
#   legacy-1.0.h5 (not regenerated) good.h5 as format 1.0.0 wrote it, without the
#                 root attributes' checksum: still read
#   legacy-1.1.h5 (not regenerated) good.h5 as format 1.1.0 wrote it, its
#                 checksums FNV-1a 64 (attributes fnv1a64): still read
set -euo pipefail
kpipe=$1
here=tests/data/checkpoints
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$kpipe" run $here/tiny.toml train.steps=1 checkpoint.every=1 checkpoint.path="$work" >/dev/null
cp "$work/step-1.h5" $here/good.h5
size=$(stat -c %s $here/good.h5)
head -c $((size / 2)) $here/good.h5 > $here/truncated.h5
offset=$(h5dump -p -H -d /parameters/layer0.weight $here/good.h5 | sed -n 's/.*OFFSET \([0-9]*\).*/\1/p')
cp $here/good.h5 $here/flipped.h5
byte=$(od -An -tu1 -j "$offset" -N1 $here/good.h5 | tr -d ' ')
printf '%b' "$(printf '\\0%03o' $((byte ^ 1)))" | dd of=$here/flipped.h5 bs=1 seek="$offset" conv=notrunc status=none
echo "this is a text file, not a kpipe checkpoint" > $here/not-hdf5.h5
