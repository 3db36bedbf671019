#!/usr/bin/env bash
# Installs the Debian packages kpipe needs, only those missing. Idempotent and
# quiet: prints nothing when everything is present, the apt log on failure.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libtrilinos-kokkos-dev                      # Kokkos (Serial backend)
  libopenmpi-dev openmpi-bin                  # MPI
  libhdf5-openmpi-dev hdf5-tools              # parallel HDF5, h5dump
  libopenblas-dev                             # CBLAS for the vendor GEMM path
  libdnnl-dev                                 # oneDNN for compute.gemm = "packed" (optional: CMake detects it)
  ocl-icd-opencl-dev                          # OpenCL, which oneDNN's CMake package config requires
  libxsmm-dev                                 # libxsmm for "packed" where oneDNN has no blocked layout (AVX2; optional)
  libtoml11-dev libcli11-dev nlohmann-json3-dev libfmt-dev
  libxxhash-dev                               # xxHash: checkpoint checksums
  libsentencepiece-dev sentencepiece          # subword tokens (data.tokenizer = "sentencepiece"), spm_train
  catch2 libbenchmark-dev
  clang-format                                # the committed .clang-format, checked by a test
  shellcheck                                  # every shell script is linted by a test
  python3-h5py python3-numpy python3-matplotlib
  python3-torch python3-venv                  # PyTorch under transformers (a venv from PyPI) in the GPT-2 interop test
  slurm-wlm munge                             # a one-node Slurm for the job-script tests (tests/slurm)
  iproute2                                    # network namespaces and tc for the two-host tests (tests/hosts)
  nftables                                    # packet loss on the two hosts' link (tests/hosts/degraded_link.sh)
  iptables libnetfilter-queue-dev             # added latency on that link: NFQUEUE and tests/hosts/link_delay.cpp
)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
log=$(mktemp)
echo "kpipe: installing ${missing[*]}" >&2
if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "kpipe: installing Debian packages failed (log above)" >&2
  exit 1
fi
rm -f "$log"
