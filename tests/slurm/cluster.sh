#!/usr/bin/env bash
# A real one-node Slurm cluster on localhost for the job-script tests: munged,
# slurmctld and slurmd from Debian's slurm-wlm, with every file (configuration,
# munge key and socket, state, logs, job completions) under DIR and ports of
# their own, so nothing of a system Slurm is used or disturbed.
#   cluster.sh start DIR   starts the daemons, marks DIR/up; prints the SLURM_CONF to export
#   cluster.sh stop DIR    stops them and checks that none is left behind
# start exits 77 with one line where the daemons cannot run here (not root, or
# slurm-wlm missing); the tests that need the cluster then skip with it.
set -euo pipefail
action=${1:?usage: cluster.sh start|stop DIR}
dir=${2:?usage: cluster.sh start|stop DIR}
conf=$dir/slurm.conf
controller_port=${KPIPE_SLURMCTLD_PORT:-16817}
node_port=${KPIPE_SLURMD_PORT:-16818}

# Stops whatever a previous start in DIR left running, by its pid files
# (SIGTERM, which each daemon handles as a shutdown; SIGKILL after 10 s).
stop() {
  rm -f "$dir/up"
  local daemon pid
  for daemon in slurmd slurmctld munged; do
    [ -f "$dir/$daemon.pid" ] || continue
    pid=$(cat "$dir/$daemon.pid")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
    rm -f "$dir/$daemon.pid"
  done
  # Job steps outlive a daemon killed without shutdown: their slurmstepd names DIR's spool.
  pkill -KILL -f "slurmstepd.*$dir" 2>/dev/null || true
  if pgrep -f -- "$dir/slurm.conf|$dir/munge" >/dev/null; then
    echo "cluster.sh: daemons of $dir are still running: $(pgrep -a -f -- "$dir/slurm.conf|$dir/munge")" >&2
    return 1
  fi
}

# Whether something listens on TCP `port` of localhost.
listening() { (: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

skip() {
  echo "cluster.sh: no Slurm cluster: $1" >&2
  exit 77
}

start() {
  [ "$(id -u)" -eq 0 ] || skip "its daemons run as root here (slurmd launches every job's tasks); run as root"
  local program
  for program in munged slurmctld slurmd sbatch; do
    command -v "$program" >/dev/null || skip "$program is missing (Debian packages slurm-wlm and munge)"
  done
  stop
  local port
  for port in "$controller_port" "$node_port"; do
    if listening "$port"; then
      echo "cluster.sh: port $port is taken (another Slurm?); stop it, or choose free ports with" \
        "KPIPE_SLURMCTLD_PORT and KPIPE_SLURMD_PORT" >&2
      exit 1
    fi
  done
  rm -rf "$dir"
  mkdir -p "$dir/state" "$dir/spool"
  chmod 0700 "$dir"
  dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$dir/munge.key"
  # --force: munged refuses keys and sockets under world-writable parents (/tmp) without it.
  munged --force --key-file="$dir/munge.key" --socket="$dir/munge.socket" --pid-file="$dir/munged.pid" \
    --log-file="$dir/munged.log" --seed-file="$dir/munged.seed"

  local host cpus
  host=$(hostname -s)
  cpus=$(nproc)
  cat >"$conf" <<EOF
# Written by tests/slurm/cluster.sh for kpipe's job-script tests.
ClusterName=kpipe-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$controller_port
SlurmdPort=$node_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
# No cgroups in a container: processes are tracked by their parent ids.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
# sacct --completion reads this file: no database daemon needed.
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/jobcomp.txt
AccountingStorageType=accounting_storage/none
# A requeued job may start again at once.
MinJobAge=600
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  SLURM_CONF=$conf slurmctld -f "$conf"
  SLURM_CONF=$conf slurmd -f "$conf"
  local state=""
  for _ in $(seq 300); do
    state=$(SLURM_CONF=$conf sinfo -h -n "$host" -o %T 2>/dev/null || true)
    [ "$state" = idle ] && break
    sleep 0.1
  done
  if [ "$state" != idle ]; then
    echo "cluster.sh: the node is '${state:-unknown}' after 30 s, not idle; logs:" >&2
    tail -n 5 "$dir"/*.log >&2
    stop || true
    exit 1
  fi
  touch "$dir/up"
  echo "SLURM_CONF=$conf"
}

case $action in
  start) start ;;
  stop) stop ;;
  *)
    echo "cluster.sh: unknown action '$action': use start or stop" >&2
    exit 2
    ;;
esac
