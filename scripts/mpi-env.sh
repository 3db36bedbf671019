# shellcheck shell=bash
# Sourced by the scripts that launch MPI jobs: the Open MPI settings a job
# needs on this machine, and nothing where it does not need them.
# As root, Open MPI refuses to start without these two.
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# Tests run up to 4 ranks; allow more ranks than cores.
export OMPI_MCA_rmaps_base_oversubscribe=1
# One BLAS thread per rank: ranks already fill the cores.
export OPENBLAS_NUM_THREADS=1
