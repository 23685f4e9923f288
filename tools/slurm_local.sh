#!/usr/bin/env bash
# A real one-node Slurm cluster on this machine, from Debian's packages (slurm-wlm, munge): for trying
# the sweep's Slurm launcher where no cluster is at hand, and for its tests.
#
#   bash tools/slurm_local.sh start     # install if needed, write the config, start munged, slurmctld, slurmd
#   bash tools/slurm_local.sh status    # sinfo
#   bash tools/slurm_local.sh stop      # stop the daemons (the state folder stays)
#   source <(bash tools/slurm_local.sh env)   # SLURM_CONF for sbatch, squeue, scancel and the sweep
#
# The node is this machine (its short host name, all its cores and 90 % of its memory) in the partition
# `local`; state, logs and slurm.conf live in $ATTNBENCH_SLURM_DIR (default /tmp/attnbench-slurm). Needs root
# (apt-get, the daemons). `start` waits until sinfo shows the node idle and exits non-zero, with the
# reason, when the cluster cannot start.
set -euo pipefail

DIR="${ATTNBENCH_SLURM_DIR:-/tmp/attnbench-slurm}"
CONF="$DIR/slurm.conf"
PARTITION=local
log() { printf '[slurm_local] %s\n' "$*" >&2; }
fail() { log "$*"; exit 1; }

install() {
    command -v slurmctld > /dev/null && command -v slurmd > /dev/null && command -v munged > /dev/null && return
    [ "$(id -u)" -eq 0 ] || fail "slurm-wlm and munge are not installed and this is not root: install them first"
    command -v apt-get > /dev/null || fail "no apt-get: install Slurm (slurmctld, slurmd) and munge yourself"
    log "installing Debian's slurm-wlm and munge"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge > "$DIR/apt.log" 2>&1 \
        || { apt-get update -qq > /dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge \
            > "$DIR/apt.log" 2>&1; } || fail "apt-get could not install slurm-wlm and munge (see $DIR/apt.log)"
}

write_config() {
    local host cpus memory
    host="$(hostname -s)"
    cpus="$(nproc)"
    memory="$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo)"
    mkdir -p "$DIR/state" "$DIR/spool"
    cat > "$CONF" <<EOF
# One-node cluster of tools/slurm_local.sh (written $(date -u +%FT%TZ)).
ClusterName=attnbench
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobRequeue=1
KillWait=10
NodeName=$host CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=$PARTITION Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
}

start_munge() {
    if munge -n 2> /dev/null | unmunge > /dev/null 2>&1; then
        return
    fi
    [ -s /etc/munge/munge.key ] || { mungekey --create 2> /dev/null || create-munge-key -f; } \
        || fail "no munge key (/etc/munge/munge.key) and none could be made"
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge 2> /dev/null || true
    su -s /bin/sh munge -c munged 2> "$DIR/munged.err" || munged --force 2>> "$DIR/munged.err" \
        || fail "munged did not start: $(tail -1 "$DIR/munged.err")"
    for _ in $(seq 20); do munge -n 2> /dev/null | unmunge > /dev/null 2>&1 && return; sleep 0.5; done
    fail "munged started but does not answer"
}

start() {
    mkdir -p "$DIR"
    install
    write_config
    start_munge
    export SLURM_CONF="$CONF"
    stop_daemons
    slurmctld -i || fail "slurmctld did not start (see $DIR/slurmctld.log)"
    slurmd || fail "slurmd did not start (see $DIR/slurmd.log)"
    for _ in $(seq 60); do
        if [ "$(sinfo -h -p "$PARTITION" -o %t 2> /dev/null)" = idle ]; then
            scontrol update nodename="$(hostname -s)" state=resume > /dev/null 2>&1 || true
            log "up: partition $PARTITION, node $(hostname -s) with $(nproc) CPUs; export SLURM_CONF=$CONF"
            return
        fi
        sleep 1
    done
    fail "the node did not come up idle within 60 s: $(sinfo -h -o '%t %E' 2>&1 | head -1) (see $DIR/slurmctld.log)"
}

stop_daemons() {
    local name pid
    for name in slurmd slurmctld; do
        if [ -f "$DIR/$name.pid" ]; then
            pid="$(cat "$DIR/$name.pid")"
            kill "$pid" 2> /dev/null || true
            for _ in $(seq 20); do kill -0 "$pid" 2> /dev/null || break; sleep 0.5; done
            rm -f "$DIR/$name.pid"
        fi
    done
}

case "${1:-}" in
    start) start ;;
    stop) stop_daemons; log "stopped (munged left running; state in $DIR)" ;;
    status) SLURM_CONF="$CONF" sinfo ;;
    env) echo "export SLURM_CONF=$CONF" ;;
    *) echo "usage: bash tools/slurm_local.sh start|stop|status|env" >&2; exit 2 ;;
esac
