#!/usr/bin/env bash
# Brings up a single-node SLURM cluster on this machine for the cluster test.
#
#   tests/cluster/slurm_up.sh [STATE_DIR]      (default: $VERIHARNESS_SLURM_DIR or /tmp/veriharness-slurm)
#
# SLURM's state, spool, pid and log files live under STATE_DIR. Two files must sit at their
# default places: munge's key (/etc/munge/munge.key; auth/munge talks to munged on its default
# socket) and /etc/slurm/slurm.conf, because Snakemake's slurm-jobstep executor removes SLURM_CONF
# from the environment of the inner srun, which then finds no other configuration. An existing
# /etc/slurm/slurm.conf that this script did not write is never overwritten.
#
# The script records the daemons it started in STATE_DIR/started, so slurm_down.sh ends those and
# nothing else. Running it again while the cluster is up only checks that the node is idle. On
# success the last line of stdout is SLURM_CONF=/etc/slurm/slurm.conf.
#
# Needs root and the Debian packages slurm-wlm and munge (./setup.sh --test installs them).
set -euo pipefail

state_dir=${1:-${VERIHARNESS_SLURM_DIR:-/tmp/veriharness-slurm}}
partition=${VERIHARNESS_SLURM_PARTITION:-debug}
node=$(hostname)
wait_seconds=${VERIHARNESS_SLURM_WAIT:-120}

say() { printf 'slurm_up: %s\n' "$*" >&2; }
die() { printf 'slurm_up: ERROR: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (slurmd and munge need it); current uid is $(id -u)"
for cmd in munged munge unmunge slurmctld slurmd slurmstepd scontrol sinfo sbatch squeue runuser; do
  command -v "$cmd" >/dev/null || die "command '$cmd' not found; install with: apt-get install slurm-wlm munge"
done

mkdir -p "$state_dir"/{state,spool,log,run}
state_dir=$(cd "$state_dir" && pwd)
started="$state_dir/started"
touch "$started"
conf=/etc/slurm/slurm.conf
marker="# Written by tests/cluster/slurm_up.sh"
export SLURM_CONF="$conf"

alive() {  # alive PID NAME: the process exists and is the named program
  [ -n "$1" ] && [ -r "/proc/$1/comm" ] && [ "$(cat "/proc/$1/comm")" = "$2" ]
}
pid_of() { [ -s "$1" ] && tr -d '[:space:]' < "$1" || true; }
record() { grep -qx "$1 $2" "$started" || echo "$1 $2" >> "$started"; }

wait_until() {  # wait_until SECONDS COMMAND...: poll once a second; status 1 on timeout
  local limit=$1 i; shift
  for ((i = 0; i < limit; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 1
  done
  return 1
}

# --- munge ------------------------------------------------------------------------------------
key=/etc/munge/munge.key
if [ ! -s "$key" ]; then
  say "creating the munge key $key"
  install -d -o munge -g munge -m 0700 /etc/munge
  dd if=/dev/urandom of="$key" bs=1 count=1024 status=none
fi
chown munge:munge "$key"
chmod 0400 "$key"
install -d -o munge -g munge -m 0755 /run/munge /var/lib/munge /var/log/munge

munge_ok() { munge -n | unmunge; }
if munge_ok >/dev/null 2>&1; then
  say "munged is already answering; leaving it alone"
else
  say "starting munged as user munge"
  runuser -u munge -- munged --force
  wait_until 20 munge_ok || die "munged did not answer on /run/munge/munge.socket.2 within 20s; see /var/log/munge/munged.log"
  record munged "$(pid_of /run/munge/munged.pid)"
fi

# --- slurm.conf -------------------------------------------------------------------------------
# slurmd -C reports this machine's CPUs, sockets, cores and memory in slurm.conf syntax.
detected=$(slurmd -C | head -n 1)
case "$detected" in
  "NodeName=$node "*) ;;
  *) die "slurmd -C printed '$detected', expected a line starting with 'NodeName=$node '" ;;
esac
# The node offers cpu_factor times the machine's CPUs (SlurmdParameters=config_overrides lets
# slurmd accept that). The test's jobs mostly wait (on the model, on Chromium, on each other), and
# it runs three cluster invocations side by side: with only the real CPUs, SLURM would run two of
# their jobs at a time, serialising the test and hiding whether Snakemake's own cap on concurrent
# sessions holds in cluster runs.
cpu_factor=${VERIHARNESS_SLURM_CPU_FACTOR:-4}
cpus=$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<< "$detected")
memory=$(sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p' <<< "$detected")
[ -n "$cpus" ] && [ -n "$memory" ] || die "slurmd -C printed '$detected', without CPUs= and RealMemory="
node_line="NodeName=$node CPUs=$((cpus * cpu_factor)) RealMemory=$memory"

new_conf=$(cat <<CONF
$marker: a one-node cluster for VeriHarness's cluster test, state in $state_dir.
ClusterName=veriharness
SlurmctldHost=$node
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmdParameters=config_overrides
# Finished jobs stay visible to squeue and scontrol for an hour: Snakemake's executor reads job
# states with squeue (there is no accounting database for sacct), and the test reads every job's
# record once all its runs have ended, tens of minutes later on a loaded machine.
MinJobAge=3600
StateSaveLocation=$state_dir/state
SlurmdSpoolDir=$state_dir/spool
SlurmctldPidFile=$state_dir/run/slurmctld.pid
SlurmdPidFile=$state_dir/run/slurmd.pid
SlurmctldLogFile=$state_dir/log/slurmctld.log
SlurmdLogFile=$state_dir/log/slurmd.log
$node_line
PartitionName=$partition Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
)
if [ -f "$conf" ] && ! head -n 1 "$conf" | grep -q "^$marker"; then
  die "$conf exists and was not written by this script; move it away to use the test cluster"
fi
if [ ! -f "$conf" ] || [ "$(cat "$conf")" != "$new_conf" ]; then
  for daemon in slurmctld slurmd; do
    if alive "$(pid_of "$state_dir/run/$daemon.pid")" "$daemon"; then
      die "$conf would change while $daemon runs; run tests/cluster/slurm_down.sh '$state_dir' first"
    fi
  done
  mkdir -p /etc/slurm
  printf '%s\n' "$new_conf" > "$conf"
  say "wrote $conf"
fi

# --- daemons ----------------------------------------------------------------------------------
start_daemon() {  # start_daemon NAME PIDFILE: start unless our own copy is already running
  local name=$1 pidfile=$2 pid other
  pid=$(pid_of "$pidfile")
  if alive "$pid" "$name"; then
    say "$name already running as pid $pid"
    return 0
  fi
  other=$(pgrep -x "$name" || true)
  [ -z "$other" ] || die "another $name is running (pid $other) that this script did not start; stop it first"
  say "starting $name"
  "$name" -f "$conf"
  wait_until 30 test -s "$pidfile" || die "$name wrote no $pidfile within 30s; see $state_dir/log/$name.log"
  pid=$(pid_of "$pidfile")
  alive "$pid" "$name" || die "$name exited right after starting; see $state_dir/log/$name.log"
  record "$name" "$pid"
}

start_daemon slurmctld "$state_dir/run/slurmctld.pid"
ctld_up() { scontrol ping | grep -q UP; }
wait_until 60 ctld_up || die "slurmctld did not answer 'scontrol ping' within 60s; see $state_dir/log/slurmctld.log"
start_daemon slurmd "$state_dir/run/slurmd.pid"

node_idle() { [ "$(sinfo -h -n "$node" -o %t)" = idle ]; }
say "waiting (at most ${wait_seconds}s) for node $node to be idle"
wait_until "$wait_seconds" node_idle ||
  die "node $node not idle after ${wait_seconds}s (sinfo state: '$(sinfo -h -n "$node" -o %t 2>&1)'); see $state_dir/log/"
say "node $node is idle in partition $partition"
echo "SLURM_CONF=$conf"
