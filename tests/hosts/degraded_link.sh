#!/usr/bin/env bash
# A slow, lossy link between the two hosts (two_hosts.sh): both ends of the
# veth pair are shaped to 200 Mbit/s (tc tbf) and kpipe-h1 drops 1% of what
# it sends at random (nftables numgen). This kernel has no netem, so the
# link's added delay comes from its rate (a 64 KiB boundary message takes
# 2.6 ms on the wire) and TCP's retransmissions, not from a fixed latency.
# A p = 2 run of the compute-bound deck with one stage on each host, under a
# 5 s watchdog, must finish (a slow but live link is no fault), with losses
# bitwise those of the same run on one host; its own calibration must fit
# the slow link (a fitted transfer time well above shared memory's) and
# predict its step within 10%. The shaping is proven by the qdisc's and the
# rule's counters, and removed afterwards.
#   degraded_link.sh KPIPE MPIEXEC
set -uo pipefail
kpipe=$1 mpiexec=$2
# shellcheck source=tests/hosts/hosts-env.sh
source "$(dirname "$0")/hosts-env.sh"
if ! command -v nft >/dev/null; then
  echo "no nft (Debian package nftables) to drop packets with"
  exit 77
fi
work=$(mktemp -d)
restore() {
  local i
  for i in 1 2; do ip -n "kpipe-h$i" link show >/dev/null 2>&1 && tc -n "kpipe-h$i" qdisc del dev "kpipe-h$i-eth" root 2>/dev/null; done
  ip netns exec kpipe-h1 nft delete table inet kpipe_faults 2>/dev/null
  rm -rf "$work"
}
trap restore EXIT
for i in 1 2; do
  tc -n "kpipe-h$i" qdisc add dev "kpipe-h$i-eth" root tbf rate 200mbit burst 64kb latency 100ms ||
    { echo "tc cannot shape the link (no tbf qdisc)"; exit 77; }
done
ip netns exec kpipe-h1 nft -f - <<'EOF' || { echo "nft cannot add the drop rule"; exit 77; }
table inet kpipe_faults {
  chain out {
    type filter hook output priority 0;
    oifname "kpipe-h1-eth" numgen random mod 100 < 1 counter drop
  }
}
EOF

cd "$root" || exit 1
run=(run benchmarks/decks/compute_bound.toml runtime.watchdog_seconds=5)
# One run over the slow, lossy link; succeeds when its calibration fits the
# link (a fitted transfer above 0.5 ms, the step predicted within 10%).
# Shared memory moves a 64 KiB boundary in about 20 us; the shaped link in 0.6
# to 3 ms, depending on how much of tbf's 64 KB burst the previous message
# left (0.67 ms in a CI run under load, with the oneDNN float32 GEMMs).
slow_run() {
  if ! across_hosts 1 "$kpipe" "${run[@]}" --json "$work/slow.json" >"$work/slow.log" 2>&1; then
    # Open MPI's daemon wire-up has no retry of its own: a lost packet there ends the launch, before kpipe runs.
    if grep -q "unable to reliably start one or more daemons" "$work/slow.log"; then
      echo "Open MPI could not start its daemon across the lossy link"
      return 1
    fi
    echo "the run over the slow, lossy link failed"
    tail -n 20 "$work/slow.log"
    exit 1
  fi
  dropped=$(ip netns exec kpipe-h1 nft list table inet kpipe_faults | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
  shaped=$(tc -s -n kpipe-h1 qdisc show dev kpipe-h1-eth | sed -n 's/.*overlimits \([0-9]*\).*/\1/p')
  echo "the link dropped $dropped packets and held back $shaped at its rate"
  if [ "${dropped:-0}" -eq 0 ] || [ "${shaped:-0}" -eq 0 ]; then echo "the link was not degraded"; exit 1; fi
  calibration=$(grep "^calibration: step" "$work/slow.log") || { echo "no calibration line"; exit 1; }
  echo "$calibration"
  read -r measured simulated transfer < <(/usr/bin/python3 - "$work/slow.json" "$calibration" <<'EOF'
import json, re, sys
line = sys.argv[2]
measured = float(re.search(r"calibration: step ([0-9.]+) ms", line).group(1))
simulated = float(re.search(r"simulated with these costs: step ([0-9.]+) ms", line).group(1))
fit = json.load(open(sys.argv[1]))["calibration"]
bandwidth = fit["link_bandwidth_bytes_per_second"]  # 0: the fit put it all in the latency
transfer = fit["link_latency_seconds"] + (fit["bytes_per_transfer"] / bandwidth if bandwidth > 0 else 0.0)
print(measured, simulated, transfer * 1e3)
EOF
  )
  echo "fitted time per boundary transfer $transfer ms; step measured $measured ms, simulated $simulated ms"
  /usr/bin/python3 -c "import sys; m, s, l = map(float, sys.argv[1:]); sys.exit(0 if abs(s - m) <= 0.1 * m and l > 0.5 else 1)" \
    "$measured" "$simulated" "$transfer"
}
# The fit times compute and transfers: another process on the two cores (a
# parallel test) skews it, so a run whose calibration misses, or whose launch
# the lossy link broke, gets two more tries; every run that starts must
# survive the link and find it degraded.
for attempt in 1 2 3; do
  slow_run && break
  [ "$attempt" -lt 3 ] || { echo "three tries failed to start or to fit the slow link (within 10%, a transfer above 0.5 ms)"; exit 1; }
  echo "try $attempt failed (a lost wire-up packet or a busy machine); again"
done

"$mpiexec" -n 2 "$kpipe" "${run[@]}" --json "$work/one.json" >"$work/one.log" 2>&1 ||
  { echo "the run on one host failed"; tail -n 20 "$work/one.log"; exit 1; }
same_losses "$work/slow.json" "$work/one.json" "slow link"
echo "slow, lossy link: the run finished under its watchdog, calibrated within 10%, losses bitwise those on one host"
