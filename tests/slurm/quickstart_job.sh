#!/usr/bin/env bash
# README's main job under a real Slurm (tests/slurm/cluster.sh): sbatch runs
# examples/jobs/slurm-cpu.sbatch on the quickstart deck with the 2 tasks the
# deck asks for; the job completes (sacct), and its losses are those of the
# same deck run with examples/jobs/local.sh (mpirun), bit for bit. Then the
# same script given 1 task refuses the allocation in one line, exit code 2.
#   quickstart_job.sh CLUSTER_DIR KPIPE
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
kpipe=$2
# shellcheck source=tests/slurm/slurm-env.sh
source "$root/tests/slurm/slurm-env.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
export KPIPE=$kpipe KPIPE_ROOT=$root
args=(inputs/quickstart.toml checkpoint.path="$work/checkpoints")

job=$(sbatch --parsable --wait --ntasks=2 --cpus-per-task=1 -o "$work/job.out" \
  "$root/examples/jobs/slurm-cpu.sbatch" "$root/${args[0]}" "${args[@]:1}" --json "$work/slurm.json")
code=$?
cat "$work/job.out"
[ "$code" -eq 0 ] || { echo "the Slurm job $job ended with exit code $code"; exit 1; }
sacct --completion -j "$job" -o JobID,State,ExitCode
sacct --completion -n -j "$job" -o State | grep -q COMPLETED || { echo "sacct does not show job $job completed"; exit 1; }

(cd "$root" && examples/jobs/local.sh run "${args[@]}" checkpoint.path="$work/local" --json "$work/local.json") \
  >"$work/local.log" 2>&1 || { echo "local.sh failed"; tail -n 5 "$work/local.log"; exit 1; }
if [ -z "$(losses "$work/slurm.json")" ] || [ "$(losses "$work/slurm.json")" != "$(losses "$work/local.json")" ]; then
  echo "losses differ: Slurm $(losses "$work/slurm.json"), local.sh $(losses "$work/local.json")"
  exit 1
fi

sbatch --wait --ntasks=1 --cpus-per-task=1 -o "$work/mismatch.out" \
  "$root/examples/jobs/slurm-cpu.sbatch" "$root/${args[0]}" "${args[@]:1}" >/dev/null
code=$?
cat "$work/mismatch.out"
[ "$code" -eq 2 ] || { echo "a 1-task job of a 2-rank deck exited $code, not 2"; exit 1; }
if [ "$(wc -l <"$work/mismatch.out")" -ne 1 ] ||
  ! grep -q "needs 2 MPI ranks .* has 1 tasks; submit it with --ntasks=2" "$work/mismatch.out"; then
  echo "the refusal is not the one line expected"
  exit 1
fi
echo "sbatch slurm-cpu.sbatch: completed with local.sh's losses; a mismatched allocation refused in one line"
