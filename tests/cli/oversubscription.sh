#!/usr/bin/env bash
# A run whose threads oversubscribe its cores says so once, in one line
# (issue 27), and a run that fits says nothing: two ranks held to one CPU by
# taskset (mpirun binding nothing) are warned about; one rank on it is not.
# One Kokkos thread per rank, whatever the build's backend or the caller's
# OMP_NUM_THREADS: the crowding is the ranks'.
#   oversubscription.sh MPIEXEC KPIPE
set -uo pipefail
mpiexec=$1 kpipe=$2
command -v taskset >/dev/null || { echo "no taskset (util-linux) to hold the ranks to one CPU"; exit 77; }
run=(run inputs/quickstart.toml train.steps=1)
export OMP_NUM_THREADS=1

crowded=$(OPENBLAS_NUM_THREADS=1 taskset -c 0 "$mpiexec" --bind-to none -n 2 "$kpipe" "${run[@]}" 2>&1) ||
  { echo "the crowded run failed"; tail -n 20 <<<"$crowded"; exit 1; }
warnings=$(grep -c "^kpipe: warning: node .*: 2 ranks x 1 Kokkos thread = 2 busy threads on 1 core; run at most 1 rank there" \
  <<<"$crowded")
[ "$warnings" -eq 1 ] || { echo "expected the warning once, got $warnings:"; grep "warning" <<<"$crowded"; exit 1; }

alone=$(OPENBLAS_NUM_THREADS=1 taskset -c 0 "$mpiexec" --bind-to none -n 1 "$kpipe" "${run[@]}" pipeline.stages=1 2>&1) ||
  { echo "the run on one core failed"; tail -n 20 <<<"$alone"; exit 1; }
if grep -q "^kpipe: warning: node" <<<"$alone"; then
  echo "a run that fits its core was warned about:"
  grep "warning" <<<"$alone"
  exit 1
fi
echo "oversubscription: one warning when crowded, none when the run fits"
