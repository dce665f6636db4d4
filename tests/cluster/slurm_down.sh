#!/usr/bin/env bash
# Stops the daemons that tests/cluster/slurm_up.sh started, and only those.
#
#   tests/cluster/slurm_down.sh [STATE_DIR]    (default: $VERIHARNESS_SLURM_DIR or /tmp/veriharness-slurm)
#
# slurm_up.sh lists each daemon it started as "NAME PID" in STATE_DIR/started. A daemon is ended
# only while that pid still runs the named program, so a recycled pid is never signalled. Daemons
# that were already running before slurm_up.sh (e.g. a system munged) are not in the list and are
# left alone. Jobs still on the cluster are cancelled first, and the /etc/slurm/slurm.conf that
# slurm_up.sh wrote is removed last. Safe to run twice. The state directory is kept for its logs.
set -euo pipefail

state_dir=${1:-${VERIHARNESS_SLURM_DIR:-/tmp/veriharness-slurm}}
started="$state_dir/started"

say() { printf 'slurm_down: %s\n' "$*" >&2; }
die() { printf 'slurm_down: ERROR: %s\n' "$*" >&2; exit 1; }

if [ ! -f "$started" ]; then
  say "nothing to stop: $started does not exist"
  exit 0
fi

alive() { [ -r "/proc/$1/comm" ] && [ "$(cat "/proc/$1/comm")" = "$2" ]; }

stop_one() {  # stop_one NAME PID: TERM, then wait at most 30 s for it to go
  local name=$1 pid=$2 i
  if ! alive "$pid" "$name"; then
    say "$name (pid $pid) is not running"
    return 0
  fi
  say "stopping $name (pid $pid)"
  kill -TERM "$pid"
  for ((i = 0; i < 30; i++)); do
    alive "$pid" "$name" || return 0
    sleep 1
  done
  say "ERROR: $name (pid $pid) still running 30s after SIGTERM"
  return 1
}

# Jobs first: a job step outlives slurmd, so stopping the daemons under running jobs would leave
# their processes behind. Every job on this one-node test cluster was submitted to it by the
# test, so all of them are cancelled.
if grep -q '^slurmctld ' "$started" && scontrol ping 2>/dev/null | grep -q UP; then
  jobs=$(squeue -h -o %i | tr '\n' ' ')
  if [ -n "${jobs// }" ]; then
    say "cancelling jobs still queued or running: $jobs"
    # shellcheck disable=SC2086
    scancel $jobs || say "scancel reported an error (some jobs may have just finished)"
    for ((i = 0; i < 60; i++)); do
      [ -z "$(squeue -h -t PENDING,RUNNING,COMPLETING,SUSPENDED -o %i)" ] && break
      sleep 1
    done
    left=$(squeue -h -t PENDING,RUNNING,COMPLETING,SUSPENDED -o %i | tr '\n' ' ')
    [ -z "${left// }" ] || say "ERROR: jobs still active 60s after scancel: $left"
  fi
fi

# Reverse start order: slurmd, slurmctld, then munged, which both of them need while stopping.
failed=0
for name in slurmd slurmctld munged; do
  while read -r entry_name pid; do
    [ "$entry_name" = "$name" ] || continue
    stop_one "$name" "$pid" || failed=1
  done < "$started"
done
[ "$failed" = 0 ] || die "some daemons did not stop; $started kept"
: > "$started"

# Our slurm.conf goes too. Left behind with no slurmctld, it makes every `scontrol` wait ~9 s
# for the missing controller, and Snakemake's slurm executor plugin runs `scontrol show config`
# when it is imported: every snakemake command on the machine, local runs included, would pay it.
conf=/etc/slurm/slurm.conf
if [ -f "$conf" ] && head -n 1 "$conf" | grep -q '^# Written by tests/cluster/slurm_up.sh'; then
  rm -f "$conf"
  say "removed $conf"
fi
say "stopped"
