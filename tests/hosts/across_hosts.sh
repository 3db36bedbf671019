#!/usr/bin/env bash
# kpipe across two hosts with no shared memory between them (two_hosts.sh):
# mpirun runs on kpipe-h1 and starts its daemon on kpipe-h2 through
# netns_rsh.sh; 2 ranks per host, the byte transport TCP on the veth link
# (shared memory only between ranks of one host). The run's losses must be
# bitwise those of the same run on one host; Open MPI's report must show the
# ranks on two nodes and a TCP connection between them, and kpipe's the ranks
# of each host, with every tensor group inside one.
#   across_hosts.sh KPIPE MPIEXEC DECK [key=value ...]
set -uo pipefail
kpipe=$1 mpiexec=$2
shift 2
# shellcheck source=tests/hosts/hosts-env.sh
source "$(dirname "$0")/hosts-env.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$root" || exit 1
# btl_base_verbose: Open MPI names each TCP connection it makes, the proof
# that ranks on different hosts talk over the link.
network+=(--mca btl_base_verbose 30)
across_hosts 2 --display-map "$kpipe" run "$@" --json "$work/two.json" >"$work/two.log" 2>&1 ||
  { echo "the run across two hosts failed"; tail -n 20 "$work/two.log"; exit 1; }
grep -E "Data for node|process grid" "$work/two.log" | sort -u
[ "$(grep "Data for node" "$work/two.log" | sort -u | wc -l)" -eq 2 ] || { echo "the ranks were not placed on two nodes"; exit 1; }
grep "^hosts: kpipe-h1 holds world ranks 0..1; kpipe-h2 holds world ranks 2..3$" "$work/two.log" ||
  { echo "kpipe does not report the ranks of each host"; exit 1; }
if grep "spans hosts" "$work/two.log"; then echo "a tensor group spans the hosts"; exit 1; fi
grep -m 1 "kpipe-h1.*connect() to 10.77.0.2" "$work/two.log" ||
  { echo "no TCP connection from kpipe-h1 to kpipe-h2 in Open MPI's report"; exit 1; }
"$mpiexec" -n 4 "$kpipe" run "$@" --json "$work/one.json" >"$work/one.log" 2>&1 ||
  { echo "the run on one host failed"; tail -n 20 "$work/one.log"; exit 1; }
same_losses "$work/two.json" "$work/one.json" "two hosts"
echo "across two hosts (TCP between them): losses bitwise those on one host"
