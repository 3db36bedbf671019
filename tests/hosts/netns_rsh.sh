#!/usr/bin/env bash
# Open MPI's remote-shell agent for the namespaced hosts (two_hosts.sh):
# `netns_rsh.sh HOST COMMAND...` runs COMMAND (a shell command line, as ssh
# would) in HOST's network namespace with HOST as its hostname. HOST is a
# namespace name or its address (10.77.0.N is kpipe-hN).
set -euo pipefail
host=${1:?usage: netns_rsh.sh HOST COMMAND...}
shift
case $host in
  10.77.0.[12]) namespace=kpipe-h${host##*.} ;;
  *) namespace=$host ;;
esac
exec ip netns exec "$namespace" unshare --uts sh -c "hostname $namespace && $*"
