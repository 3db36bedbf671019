# shellcheck shell=bash
# Sourced by the two-host tests: here and root (the repository), Open MPI's
# environment, the network options every run across the hosts takes, or
# exit 77 (skipped) with one line when two_hosts.sh made no hosts;
# across_hosts, which launches a run over both; and same_losses, which
# compares a run's losses with the same run on one host.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
if ! ip netns list 2>/dev/null | grep -qw kpipe-h2; then
  echo "no namespaced hosts (see the output of the test hosts_start)"
  exit 77
fi
# shellcheck source=scripts/mpi-env.sh
source "$root/scripts/mpi-env.sh"
# shellcheck source=tests/support/json_losses.sh
source "$root/tests/support/json_losses.sh"
# mpirun on kpipe-h1 starts its daemon on kpipe-h2 through netns_rsh.sh; TCP
# on the veth link between the hosts, shared memory within one.
# shellcheck disable=SC2034 # used by the scripts that source this file
network=(--mca plm_rsh_agent "$here/netns_rsh.sh" --mca btl "tcp,vader,self"
  --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24)

# across_hosts SLOTS MPIRUN_AND_KPIPE_ARGS...: mpirun on kpipe-h1 with SLOTS
# ranks on each host, the network options above, then the given mpirun
# options and kpipe command line; the caller's $mpiexec.
across_hosts() {
  local slots=$1
  shift
  # shellcheck disable=SC2154 # mpiexec: set by the script that sources this file
  "$here/netns_rsh.sh" kpipe-h1 "$(printf '%q ' "$mpiexec" --host "10.77.0.1:$slots,10.77.0.2:$slots" \
    -n $((2 * slots)) "${network[@]}" "$@")"
}

# same_losses JSON ONE_HOST_JSON WHAT: fails the test unless both --json
# reports hold the same losses (and some).
same_losses() {
  if [ -z "$(losses "$1")" ] || [ "$(losses "$1")" != "$(losses "$2")" ]; then
    echo "losses differ: $3 $(losses "$1"), one host $(losses "$2")"
    exit 1
  fi
}
