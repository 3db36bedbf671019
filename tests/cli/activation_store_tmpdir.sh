#!/usr/bin/env bash
# The HDF5 activation store's default place is $TMPDIR, a directory others can
# write to. Links planted there at every name the store once took (the pids
# this run may get) must change nothing: the victim keeps its bytes and the
# directory holds exactly what it held before. A $TMPDIR that is not a
# directory is refused in one line, which shows the store really goes there.
#   activation_store_tmpdir.sh KPIPE (from the repository root)
set -uo pipefail
kpipe=$1
shared=$(mktemp -d)
# Open MPI keeps its session directory elsewhere: it too follows TMPDIR.
OMPI_MCA_orte_tmpdir_base=$(mktemp -d)
export OMPI_MCA_orte_tmpdir_base
trap 'rm -rf "$shared" "$OMPI_MCA_orte_tmpdir_base"' EXIT
chmod 1777 "$shared"
echo "not kpipe's" >"$shared/precious.txt"
for pid in $(seq $$ $(($$ + 400))); do
  ln -s "$shared/precious.txt" "$shared/kpipe-activations-$pid-rank0.h5"
done
ln -s "$shared/precious.txt" "$shared/kpipe-activations-rank0-XXXXXX"
listing() { find "$shared" -mindepth 1 -printf '%f %y %l\n' | sort; }
before=$(listing)

TMPDIR=$shared timeout 120 "$kpipe" run inputs/quickstart.toml pipeline.stages=1 pipeline.activation_store=hdf5 \
  train.steps=2 >"$shared.log" 2>&1 || { echo "the run failed:"; tail -n 5 "$shared.log"; exit 1; }
grep -q "^activation store (rank 0): .* written and read per step" "$shared.log" ||
  { echo "the run reports no activation store traffic"; exit 1; }
[ "$(cat "$shared/precious.txt")" = "not kpipe's" ] || { echo "the planted link's target was written"; exit 1; }
[ "$(listing)" = "$before" ] || { echo "the shared directory changed:"; diff <(echo "$before") <(listing); exit 1; }

TMPDIR=$shared/precious.txt timeout 60 "$kpipe" run inputs/quickstart.toml pipeline.stages=1 \
  pipeline.activation_store=hdf5 train.steps=2 >/dev/null 2>"$shared.log"
code=$?
if [ "$code" -ne 2 ] || [ "$(wc -l <"$shared.log")" -ne 1 ] ||
  ! grep -q "activation_path = \"$shared/precious.txt\": not a directory" "$shared.log"; then
  echo "a TMPDIR that is a file: exit code $code, $(cat "$shared.log")"
  exit 1
fi
rm -f "$shared.log"
echo "the activation store in a shared TMPDIR wrote only its own file"
