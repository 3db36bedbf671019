#!/usr/bin/env bash
# Two hosts on one machine for the multi-host tests: network namespaces
# kpipe-h1 and kpipe-h2 joined by a veth pair (10.77.0.1 and 10.77.0.2), each
# with only that link and its loopback, so MPI between them can only use TCP.
# The hosts share the file system (the checkpoint path) but not a network
# stack; processes started by `run_on HOST` (netns_rsh.sh) also get their own
# hostname, so MPI's processor names tell the hosts apart.
#   two_hosts.sh start   makes both namespaces and the link
#   two_hosts.sh stop    removes them (and every process still inside)
# start exits 77 with one line where namespaces cannot be made (not root, no
# iproute2 or util-linux unshare); the tests that need them then skip.
set -euo pipefail
action=${1:?usage: two_hosts.sh start|stop}
hosts=(kpipe-h1 kpipe-h2)

stop() {
  local host pid
  for host in "${hosts[@]}"; do
    ip netns list 2>/dev/null | grep -qw "$host" || continue
    for pid in $(ip netns pids "$host" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns delete "$host"
  done
}

start() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "two_hosts.sh: no namespaced hosts: making network namespaces needs root" >&2
    exit 77
  fi
  local program
  for program in ip unshare; do
    if ! command -v "$program" >/dev/null; then
      echo "two_hosts.sh: no namespaced hosts: $program is missing (Debian packages iproute2, util-linux)" >&2
      exit 77
    fi
  done
  stop
  ip netns add kpipe-h1
  ip netns add kpipe-h2
  ip link add kpipe-h1-eth type veth peer name kpipe-h2-eth
  local i
  for i in 1 2; do
    ip link set "kpipe-h$i-eth" netns "kpipe-h$i"
    ip -n "kpipe-h$i" addr add "10.77.0.$i/24" dev "kpipe-h$i-eth"
    ip -n "kpipe-h$i" link set "kpipe-h$i-eth" up
    ip -n "kpipe-h$i" link set lo up
  done
  echo "two_hosts.sh: kpipe-h1 (10.77.0.1) and kpipe-h2 (10.77.0.2), joined by a veth pair"
}

case $action in
  start) start ;;
  stop) stop ;;
  *)
    echo "two_hosts.sh: unknown action '$action': use start or stop" >&2
    exit 2
    ;;
esac
