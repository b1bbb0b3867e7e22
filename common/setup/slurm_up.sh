#!/usr/bin/env bash
# Bring up a REAL single-node Slurm cluster on this machine (Debian/Ubuntu, as
# root, no systemd needed), for the tests, CI and local development.
#
#   common/setup/slurm_up.sh            # idempotent; a fast no-op when it is up
#   SPECDEC_SLURM_ACCOUNTING=1 common/setup/slurm_up.sh   # + MariaDB/slurmdbd
#   common/setup/slurm_down.sh          # stop it again
#
# What you get: node `localhost` in the default partition `debug`, CPUs = the
# machine's cores, RealMemory = MemTotal minus headroom, and Gres=gpu:4 backed
# by stand-in character devices (mknod c 1 3, i.e. /dev/null), so GPU requests
# (--gpus-per-node=4, --gres=gpu:2, ...) are scheduled for real and jobs see
# SLURM_GPUS_ON_NODE / CUDA_VISIBLE_DEVICES as on a GPU node.  The config is
# installed as /etc/slurm/slurm.conf (+ gres.conf), so plain sbatch/srun/sinfo
# and submitit work for every user of the machine without SLURM_CONF.
#
# Environment knobs:
#   SPECDEC_HOME                 scratch root (default ~/.cache/specdec-launcher)
#   SPECDEC_SLURM_STATE          state dir (default $SPECDEC_HOME/slurm)
#   SPECDEC_SLURM_ACCOUNTING=1   real accounting (sacct works; submitit then sees
#                                COMPLETED/FAILED/...); installs mariadb-server
#                                and slurmdbd on first use.  =0 turns it off;
#                                unset keeps what the installed config has
#                                (off on a fresh machine)
#   SPECDEC_SLURM_GPUS           number of stand-in GPUs (default 4)
#   SPECDEC_SLURM_CPUS           CPUs of the node (default: nproc; may exceed it)
#   SPECDEC_SLURM_MEM_MB         RealMemory (default: MemTotal - max(10%, 1 GiB))
#   SPECDEC_SLURM_TIMEOUT        seconds to wait for the node to be idle (30)
#
# stdout: exactly one status line at the end; progress and errors go to stderr.
set -euo pipefail
# SPECDEC_SLURM_NODES=N (N >= 2): the separate multi-node test cluster instead
# (common/setup/slurm_multinode.sh, selected with SLURM_CONF); this one is untouched.
if [ -n "${SPECDEC_SLURM_NODES:-}" ] && [ "${SPECDEC_SLURM_NODES}" != 1 ]; then
  exec bash "$(dirname "${BASH_SOURCE[0]}")/slurm_multinode.sh" up "$@"
fi
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

T0=$(date +%s.%N)
log() { printf '[slurm_up] %s\n' "$*" >&2; }
die() { printf '[slurm_up] ERROR: %s\n' "$*" >&2; exit 1; }

SPECDEC_HOME="${SPECDEC_HOME:-$HOME/.cache/specdec-launcher}"
STATE="${SPECDEC_SLURM_STATE:-$SPECDEC_HOME/slurm}"
MARK="# managed by specdec-launcher common/setup/slurm_up.sh"
ACCOUNTING="${SPECDEC_SLURM_ACCOUNTING:-}"
if [ -z "$ACCOUNTING" ]; then
  # Unset: keep what the running cluster has, so a test run does not switch
  # off accounting someone turned on (a config change restarts the cluster).
  ACCOUNTING=0
  if grep -qF "$MARK" /etc/slurm/slurm.conf 2>/dev/null &&
     grep -qx 'AccountingStorageType=accounting_storage/slurmdbd' /etc/slurm/slurm.conf; then
    ACCOUNTING=1
  fi
fi
[ "$ACCOUNTING" = 1 ] || ACCOUNTING=0
NGPUS="${SPECDEC_SLURM_GPUS:-4}"
TIMEOUT="${SPECDEC_SLURM_TIMEOUT:-30}"
ETC=/etc/slurm

if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    exec sudo -E SPECDEC_SLURM_STATE="$STATE" bash "$0" "$@"
  fi
  die "must run as root (or with sudo available)"
fi

mkdir -p "$STATE"
# Serialize concurrent callers (parallel test sessions, CI steps).
exec 9>"$STATE/.lock"
flock -w 300 9 || die "could not lock $STATE/.lock"

LOGD="$STATE/log"; RUND="$STATE/run"; DEVD="$STATE/dev"
CTLD_PID="$RUND/slurmctld.pid"; SLURMD_PID="$RUND/slurmd.pid"; DBD_PID="$RUND/slurmdbd.pid"

# ---------------------------------------------------------------- helpers ---
pid_alive() {  # pid_alive PIDFILE COMM
  local p
  [ -s "$1" ] || return 1
  p="$(cat "$1" 2>/dev/null)" || return 1
  [ -n "$p" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$2" ] &&
    ! awk '{exit !($3 == "Z")}' "/proc/$p/stat" 2>/dev/null  # a zombie is not alive
}
stop_pid() {  # stop_pid PIDFILE COMM  -- TERM, wait, KILL; only the pid we recorded
  pid_alive "$1" "$2" || { rm -f "$1"; return 0; }
  local p i; p="$(cat "$1")"
  kill -TERM "$p" 2>/dev/null || true
  for i in $(seq 1 50); do pid_alive "$1" "$2" || break; sleep 0.2; done
  if pid_alive "$1" "$2"; then kill -KILL "$p" 2>/dev/null || true; sleep 0.2; fi
  rm -f "$1"
}
munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
node_state() { sinfo -h -N -n localhost -o %T 2>/dev/null | head -n1; }
tails() {
  local f
  for f in "$LOGD/slurmctld.log" "$LOGD/slurmd.log" "$LOGD/slurmdbd.log" "$LOGD/daemons.out"; do
    [ -s "$f" ] || continue
    printf -- '----- tail %s -----\n' "$f" >&2
    grep -v -e 'pmix' -e 'MPI: Cannot create context' "$f" | tail -n 25 >&2  # pmix noise is harmless
  done
}
fail() { log "ERROR: $*"; tails; scontrol show node localhost 2>/dev/null | grep -E 'State|Reason' >&2 || true; exit 1; }
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }
apt_install() {  # apt_install PKG...
  log "apt-get install $*"
  export DEBIAN_FRONTEND=noninteractive
  # Wait for another apt/dpkg (e.g. a background install) instead of failing.
  local i
  for i in 1 2 3 4 5 6; do  # the lists lock is not covered by Lock::Timeout
    apt-get -o DPkg::Lock::Timeout=600 update -qq && break
    [ "$i" = 6 ] && die "apt-get update failed"
    sleep 10
  done
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "$@" >/dev/null
}

# ------------------------------------------------------------- packages ---
need=()
command -v slurmctld >/dev/null 2>&1 || need+=(slurmctld)
command -v slurmd >/dev/null 2>&1 || need+=(slurmd)
command -v sbatch >/dev/null 2>&1 || need+=(slurm-client)
[ ${#need[@]} = 0 ] || need+=(slurm-wlm)
command -v munged >/dev/null 2>&1 || need+=(munge)
if [ "$ACCOUNTING" = 1 ]; then
  command -v slurmdbd >/dev/null 2>&1 || need+=(slurmdbd)
  command -v mysqld_safe >/dev/null 2>&1 || need+=(mariadb-server)
fi
[ ${#need[@]} = 0 ] || apt_install "${need[@]}"

# ---------------------------------------------------------------- render ---
ncpu="${SPECDEC_SLURM_CPUS:-$(nproc)}"
if [ -n "${SPECDEC_SLURM_MEM_MB:-}" ]; then
  mem_mb="$SPECDEC_SLURM_MEM_MB"
else
  total_mb=$(awk '/^MemTotal:/{print int($2/1024)}' /proc/meminfo)
  head_mb=$(( total_mb / 10 )); [ "$head_mb" -ge 1024 ] || head_mb=1024
  mem_mb=$(( total_mb - head_mb )); [ "$mem_mb" -ge 256 ] || mem_mb=256
fi
# An explicit CPUs/RealMemory (e.g. CPUs=16 on a 2-core CI runner, so jobs that
# ask for realistic --cpus-per-task still schedule) needs config_overrides, or
# slurmd would drain the node for reporting less than configured.
overrides=""
if [ -n "${SPECDEC_SLURM_CPUS:-}${SPECDEC_SLURM_MEM_MB:-}" ]; then overrides="SlurmdParameters=config_overrides"; fi
gpu_last=$(( NGPUS - 1 ))
if [ "$ACCOUNTING" = 1 ]; then
  acct_lines="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStorageTRES=gres/gpu
JobCompType=jobcomp/none"
else
  acct_lines="AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none"
fi
gres_node=""; gres_types=""
if [ "$NGPUS" -gt 0 ]; then gres_node=" Gres=gpu:$NGPUS"; gres_types="GresTypes=gpu"; fi

slurm_conf="$MARK
# state: $STATE
ClusterName=local
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
$acct_lines
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=5
InactiveLimit=0
StateSaveLocation=$STATE/spool/ctld
SlurmdSpoolDir=$STATE/spool/d
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=$LOGD/slurmctld.log
SlurmdLogFile=$LOGD/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
$gres_types
$overrides
NodeName=localhost CPUs=$ncpu RealMemory=$mem_mb$gres_node State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"
gres_conf="$MARK
AutoDetect=off
"
[ "$NGPUS" -gt 0 ] && gres_conf+="NodeName=localhost Name=gpu File=$DEVD/fakegpu[0-$gpu_last]
"

# The cluster is "up" when the installed config is what we would write, all
# daemons run, munge works and the node is schedulable.
conf_same() {
  [ -f "$ETC/slurm.conf" ] && [ "$(cat "$ETC/slurm.conf")" = "$(printf '%s' "$slurm_conf")" ] &&
  [ -f "$ETC/gres.conf" ] && [ "$(cat "$ETC/gres.conf")" = "$(printf '%s' "$gres_conf")" ]
}
daemons_alive() {
  pid_alive "$CTLD_PID" slurmctld && pid_alive "$SLURMD_PID" slurmd &&
  { [ "$ACCOUNTING" != 1 ] || pid_alive "$DBD_PID" slurmdbd; }
}
status_line() {
  local st="$1" how="$2"
  printf 'slurm: %s node=localhost state=%s cpus=%s mem=%sMB gres=gpu:%s partition=debug accounting=%s conf=%s/slurm.conf state_dir=%s (%ss)\n' \
    "$how" "$st" "$ncpu" "$mem_mb" "$NGPUS" "$([ "$ACCOUNTING" = 1 ] && echo on || echo off)" "$ETC" "$STATE" "$(elapsed)"
}

# -------------------------------------------------------------- fast path ---
if conf_same && daemons_alive && munge_ok; then
  st="$(node_state)"
  case "$st" in
    idle|mixed|allocated|completing)
      status_line "$st" "already up"; exit 0 ;;
  esac
fi

# ------------------------------------------------------------------ munge ---
if ! munge_ok; then
  install -d -o munge -g munge -m 0700 /etc/munge /var/log/munge
  install -d -o munge -g munge -m 0711 /var/lib/munge
  install -d -o munge -g munge -m 0755 /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    log "creating /etc/munge/munge.key"
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  chown munge:munge /etc/munge/munge.key
  chmod 0400 /etc/munge/munge.key
  log "starting munged"
  su -s /bin/sh munge -c munged </dev/null >>"$STATE/munged.out" 2>&1 9>&- || true
  for _ in $(seq 1 50); do munge_ok && break; sleep 0.1; done
  if ! munge_ok; then  # e.g. a stale socket left by a killed munged
    log "munged did not answer; retrying with --force"
    su -s /bin/sh munge -c 'munged --force' </dev/null >>"$STATE/munged.out" 2>&1 9>&- || true
    for _ in $(seq 1 50); do munge_ok && break; sleep 0.1; done
  fi
  munge_ok || { tail -n 20 /var/log/munge/munged.log "$STATE/munged.out" >&2 2>/dev/null || true; die "munge does not work"; }
fi

# ----------------------------------------------------------------- config ---
mkdir -p "$STATE/spool/ctld" "$STATE/spool/d" "$LOGD" "$RUND" "$DEVD" "$ETC"
for i in $(seq 0 $(( NGPUS - 1 ))); do
  dev="$DEVD/fakegpu$i"
  [ -c "$dev" ] && continue
  rm -f "$dev"
  # A character device (/dev/null's numbers); Slurm rejects regular files.
  # Where mknod is not permitted, a symlink to /dev/null also stats as one.
  mknod -m 0666 "$dev" c 1 3 2>/dev/null || ln -s /dev/null "$dev"
done

clear_state=""
if ! conf_same; then
  if [ -f "$ETC/slurm.conf" ] && ! grep -qF "$MARK" "$ETC/slurm.conf"; then
    log "backing up foreign $ETC/slurm.conf to $ETC/slurm.conf.specdec-bak"
    cp -a "$ETC/slurm.conf" "$ETC/slurm.conf.specdec-bak"
    [ -f "$ETC/gres.conf" ] && cp -a "$ETC/gres.conf" "$ETC/gres.conf.specdec-bak"
  fi
  printf '%s' "$slurm_conf" > "$STATE/slurm.conf"
  printf '%s' "$gres_conf" > "$STATE/gres.conf"
  install -m 0644 "$STATE/slurm.conf" "$ETC/slurm.conf"
  install -m 0644 "$STATE/gres.conf" "$ETC/gres.conf"
  # New or changed config: restart cleanly, dropping old controller state.
  if pid_alive "$SLURMD_PID" slurmd || pid_alive "$CTLD_PID" slurmctld; then
    log "config changed: restarting slurmctld/slurmd"
  fi
  stop_pid "$SLURMD_PID" slurmd
  stop_pid "$CTLD_PID" slurmctld
  clear_state="-c"
fi

# ------------------------------------------------------------ accounting ---
if [ "$ACCOUNTING" = 0 ]; then  # switched off: stop what an earlier run started
  if pid_alive "$DBD_PID" slurmdbd; then log "accounting off: stopping slurmdbd"; stop_pid "$DBD_PID" slurmdbd; fi
  if [ -f "$RUND/mariadb.started-by-us" ]; then
    mysqladmin shutdown >/dev/null 2>&1 || true
    rm -f "$RUND/mariadb.started-by-us"
  fi
fi
if [ "$ACCOUNTING" = 1 ]; then
  mkdir -p "$LOGD" "$RUND"
  if ! mysqladmin ping >/dev/null 2>&1; then
    install -d -o mysql -g mysql -m 0755 /run/mysqld
    if [ ! -d /var/lib/mysql/mysql ]; then
      log "initializing MariaDB data dir"
      mariadb-install-db --user=mysql >/dev/null 2>&1 || mysql_install_db --user=mysql >/dev/null
    fi
    log "starting MariaDB (mysqld_safe)"
    setsid mysqld_safe --user=mysql </dev/null >>"$LOGD/mariadb.out" 2>&1 9>&- &
    touch "$RUND/mariadb.started-by-us"
    for _ in $(seq 1 150); do mysqladmin ping >/dev/null 2>&1 && break; sleep 0.2; done
    mysqladmin ping >/dev/null 2>&1 || { tail -n 30 "$LOGD/mariadb.out" >&2 || true; die "MariaDB did not start"; }
  fi
  dbpass_file="$STATE/.dbpass"
  [ -s "$dbpass_file" ] || { (umask 077; head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' > "$dbpass_file"); }
  dbpass="$(cat "$dbpass_file")"
  mysql -u root <<SQL
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$dbpass';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$dbpass';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
FLUSH PRIVILEGES;
SQL
  dbd_conf="$MARK
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$dbpass
StorageLoc=slurm_acct_db
LogFile=$LOGD/slurmdbd.log
PidFile=$DBD_PID
"
  if [ ! -f "$ETC/slurmdbd.conf" ] || [ "$(cat "$ETC/slurmdbd.conf")" != "$(printf '%s' "$dbd_conf")" ]; then
    mkdir -p "$ETC"
    (umask 077; printf '%s' "$dbd_conf" > "$ETC/slurmdbd.conf")
    stop_pid "$DBD_PID" slurmdbd
  fi
  chmod 600 "$ETC/slurmdbd.conf"
  if ! pid_alive "$DBD_PID" slurmdbd; then
    log "starting slurmdbd"
    slurmdbd </dev/null >>"$LOGD/daemons.out" 2>&1 9>&- || fail "slurmdbd failed to start"
  fi
  ok=0
  for _ in $(seq 1 150); do
    if sacctmgr -n -P show cluster format=cluster >/dev/null 2>&1; then ok=1; break; fi
    sleep 0.2
  done
  [ $ok = 1 ] || fail "slurmdbd does not answer (sacctmgr show cluster)"
  if ! sacctmgr -n -P show cluster format=cluster 2>/dev/null | grep -qx local; then
    sacctmgr -i add cluster local >/dev/null || fail "sacctmgr add cluster local failed"
  fi
fi

# ---------------------------------------------------------------- daemons ---
if ! pid_alive "$CTLD_PID" slurmctld; then
  log "starting slurmctld"
  # -i: ignore unreadable state files (e.g. left by another Slurm version)
  # shellcheck disable=SC2086
  slurmctld $clear_state -i </dev/null >>"$LOGD/daemons.out" 2>&1 9>&- || fail "slurmctld failed to start"
fi
if ! pid_alive "$SLURMD_PID" slurmd; then
  log "starting slurmd"
  slurmd -N localhost </dev/null >>"$LOGD/daemons.out" 2>&1 9>&- || fail "slurmd failed to start"
fi

# ------------------------------------------------------------------- wait ---
deadline=$(( $(date +%s) + TIMEOUT ))
last_resume=0
st=""
while :; do
  st="$(node_state)"
  case "$st" in
    idle|mixed|allocated|completing) break ;;
    inval) fail "slurmd registered with a config the node does not match (state inval)" ;;
    down|drain|drained|draining|fail|failing|down~|drain~)
      # Responding but administratively down (e.g. after a restart): resume.
      now=$(date +%s)
      if [ $(( now - last_resume )) -ge 2 ]; then
        log "node is '$st'; resuming it"
        scontrol update nodename=localhost state=resume >/dev/null 2>&1 || true
        last_resume=$now
      fi ;;
  esac
  pid_alive "$CTLD_PID" slurmctld || fail "slurmctld exited (node state '${st:-?}')"
  pid_alive "$SLURMD_PID" slurmd || fail "slurmd exited (node state '${st:-?}')"
  [ "$(date +%s)" -lt "$deadline" ] || fail "node not idle after ${TIMEOUT}s (state '${st:-no answer from slurmctld}')"
  sleep 0.2
done
status_line "$st" "up"
