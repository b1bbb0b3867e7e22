#!/usr/bin/env bash
# A REAL multi-node Slurm cluster on one machine (Linux, as root), for the tests
# and local development of multi-node jobs.  slurm_up.sh / slurm_down.sh call
# this when SPECDEC_SLURM_NODES > 1; it never touches the single-node cluster
# (/etc/slurm, ports 6817/6818), which keeps running beside it.
#
#   SPECDEC_SLURM_NODES=2 common/setup/slurm_up.sh     # up (idempotent, fast when up)
#   SPECDEC_SLURM_NODES=2 common/setup/slurm_down.sh   # remove everything it made
#   common/setup/slurm_multinode.sh up|down|status     # the same, directly
#   ... slurm_down.sh --purge                          # also delete its state dir
#
# What you get (node i = 1..N):
#   - bridge specdec-br0 10.231.77.1/24 in the root network namespace;
#   - network namespace specdec-n<i> (/run/netns) with lo up and eth0 =
#     10.231.77.<10+i>/24, a veth (specdec-v<i>) to the bridge; no default route,
#     no NAT: nothing routes off the machine;
#   - /etc/hosts lines for specdec-ctl and specdec-n<i> (marked, removed by down);
#   - one slurmctld (root network namespace, its own UTS namespace named
#     specdec-ctl, reached at 10.231.77.1:6917) and per node one slurmd in that
#     node's network namespace and its own UTS namespace (hostname specdec-n<i>,
#     port 6918), started with nsenter + unshare (`ip netns exec` remounts /sys,
#     and slurmd then finds no cgroup filesystem and refuses to start);
#   - per node CPUs = nproc, Gres=gpu:4 stand-in devices, as the single node;
#   - config in $SPECDEC_HOME/slurm-multi/{slurm.conf,gres.conf}: select this
#     cluster with SLURM_CONF=<that>/slurm.conf (sbatch, srun, sinfo, submitit
#     and a job's own srun all honour it; a job inherits it).
# The mount namespace is shared: job dirs, venvs and models are on the
# "shared filesystem" of every node, as on a real cluster.
#
# Environment knobs:
#   SPECDEC_SLURM_NODES      number of nodes (>= 2)
#   SPECDEC_HOME             scratch root (default ~/.cache/specdec-launcher)
#   SPECDEC_SLURM_GPUS       stand-in GPUs per node (default 4)
#   SPECDEC_SLURM_CPUS       CPUs per node (default: nproc; may exceed it)
#   SPECDEC_SLURM_MEM_MB     RealMemory per node (default: MemTotal - max(10%, 1 GiB))
#   SPECDEC_SLURM_TIMEOUT    seconds to wait for the nodes to be idle (30)
#
# stdout: exactly one status line; progress and errors go to stderr.
set -euo pipefail
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

T0=$(date +%s.%N)
ACTION="${1:-up}"
PURGE=0; [ "${2:-}" = "--purge" ] && PURGE=1
log() { printf '[slurm_multinode] %s\n' "$*" >&2; }
# Daemons start with fds 3-9 closed: a caller's lock (e.g. `flock FILE slurm_up.sh`) must
# not be held for ever by munged/slurmd.
die() { printf '[slurm_multinode] ERROR: %s\n' "$*" >&2; exit 1; }

NNODES="${SPECDEC_SLURM_NODES:-2}"
case "$NNODES" in ''|*[!0-9]*) die "SPECDEC_SLURM_NODES='$NNODES' is not a number (fix: SPECDEC_SLURM_NODES=2)";; esac
[ "$NNODES" -ge 2 ] || die "SPECDEC_SLURM_NODES=$NNODES: the multi-node cluster needs >= 2 (1 is the single-node cluster)"
[ "$NNODES" -le 200 ] || die "SPECDEC_SLURM_NODES=$NNODES: at most 200 nodes (addresses 10.231.77.11-210)"

if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then exec sudo -E bash "$0" "$@"; fi
  die "must run as root (or with sudo available)"
fi

SPECDEC_HOME="${SPECDEC_HOME:-$HOME/.cache/specdec-launcher}"
STATE="$SPECDEC_HOME/slurm-multi"
CONF="$STATE/slurm.conf"
GRES="$STATE/gres.conf"
LOGD="$STATE/log"; RUND="$STATE/run"; DEVD="$STATE/dev"
CTLD_PID="$RUND/slurmctld.pid"
NGPUS="${SPECDEC_SLURM_GPUS:-4}"
TIMEOUT="${SPECDEC_SLURM_TIMEOUT:-30}"
BRIDGE=specdec-br0
NET=10.231.77
BRIDGE_IP="$NET.1"
CTL=specdec-ctl
CTLD_PORT=6917
SLURMD_PORT=6918
HOSTS_MARK="# specdec-launcher slurm-multi"
MARK="# managed by specdec-launcher common/setup/slurm_multinode.sh"
export SLURM_CONF="$CONF"

node_name() { echo "specdec-n$1"; }
node_addr() { echo "$NET.$(( 10 + $1 ))"; }
veth_name() { echo "specdec-v$1"; }

mkdir -p "$STATE"
exec 9>"$STATE/.lock"
flock -w 300 9 || die "could not lock $STATE/.lock"

# ---------------------------------------------------------------- helpers ---
pid_alive() {  # pid_alive PIDFILE COMM
  local p
  [ -s "$1" ] || return 1
  p="$(cat "$1" 2>/dev/null)" || return 1
  [ -n "$p" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$2" ] &&
    ! awk '{exit !($3 == "Z")}' "/proc/$p/stat" 2>/dev/null
}
stop_pid() {  # stop_pid PIDFILE COMM  -- TERM, wait, KILL; only the pid we recorded
  pid_alive "$1" "$2" || { rm -f "$1"; return 0; }
  local p i; p="$(cat "$1")"
  log "stopping $2 (pid $p)"
  kill -TERM "$p" 2>/dev/null || true
  for i in $(seq 1 50); do pid_alive "$1" "$2" || break; sleep 0.2; done
  if pid_alive "$1" "$2"; then kill -KILL "$p" 2>/dev/null || true; sleep 0.2; fi
  rm -f "$1"
}
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }
slurmd_pidfile() { echo "$RUND/slurmd.$(node_name "$1").pid"; }
munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
# Our namespaces (specdec-n<i>) that exist now, whatever N was when they were made.
our_netns() { ls /run/netns 2>/dev/null | grep -E '^specdec-n[0-9]+$' || true; }
ns_inode() { stat -L -c %i "/run/netns/$1" 2>/dev/null; }
# PIDs of processes in network namespace $1 (by /proc/<pid>/ns/net).
ns_pids() {
  local want p; want="net:[$(ns_inode "$1")]"
  [ "$want" != "net:[]" ] || return 0
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/ns/net" 2>/dev/null)" = "$want" ] && echo "${p#/proc/}"
  done
  return 0
}
hosts_without_ours() { grep -vF "$HOSTS_MARK" /etc/hosts || true; }
write_hosts() {  # rewrite in place (/etc/hosts may be a bind mount: no rename)
  local tmp; tmp="$(mktemp)"
  { hosts_without_ours; printf '%s' "${1:-}"; } > "$tmp"
  cat "$tmp" > /etc/hosts
  rm -f "$tmp"
}
tails() {
  local f
  for f in "$LOGD"/*.log "$LOGD/daemons.out"; do
    [ -s "$f" ] || continue
    printf -- '----- tail %s -----\n' "$f" >&2
    grep -v -e 'pmix' -e 'MPI: Cannot create context' "$f" | tail -n 15 >&2
  done
}
fail() { log "ERROR: $*"; tails; sinfo -N -o '%N %T %E' >&2 2>/dev/null || true; exit 1; }

# ------------------------------------------------------------------- down ---
down() {
  local i ns p pids left
  for f in "$RUND"/slurmd.*.pid; do
    [ -e "$f" ] || continue
    stop_pid "$f" slurmd
  done
  stop_pid "$CTLD_PID" slurmctld
  for ns in $(our_netns); do
    # Anything still running in the node (a job's step that outlived its slurmd):
    # it holds the namespace alive after `ip netns del`, so it goes first.
    pids="$(ns_pids "$ns" | tr '\n' ' ')"
    if [ -n "${pids// /}" ]; then
      log "ending processes left in $ns: $pids"
      # shellcheck disable=SC2086
      kill -TERM $pids 2>/dev/null || true
      for i in $(seq 1 25); do left="$(ns_pids "$ns" | tr -d '\n')"; [ -z "$left" ] && break; sleep 0.2; done
      pids="$(ns_pids "$ns" | tr '\n' ' ')"
      # shellcheck disable=SC2086
      [ -z "${pids// /}" ] || kill -KILL $pids 2>/dev/null || true
    fi
    ip netns del "$ns" 2>/dev/null || true
  done
  for p in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E '^specdec-v[0-9]+$' || true); do
    ip link del "$p" 2>/dev/null || true
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  write_hosts ""
  local kept="state kept in $STATE"
  if [ "${PURGE:-0}" = 1 ]; then rm -rf "$STATE"; kept="purged $STATE"; fi
  echo "slurm: down multi-node (daemons, namespaces, veths, bridge $BRIDGE and /etc/hosts lines removed; $kept) ($(elapsed)s)"
}

# ----------------------------------------------------------------- render ---
ncpu="${SPECDEC_SLURM_CPUS:-$(nproc)}"
if [ -n "${SPECDEC_SLURM_MEM_MB:-}" ]; then
  mem_mb="$SPECDEC_SLURM_MEM_MB"
else
  total_mb=$(awk '/^MemTotal:/{print int($2/1024)}' /proc/meminfo)
  head_mb=$(( total_mb / 10 )); [ "$head_mb" -ge 1024 ] || head_mb=1024
  mem_mb=$(( total_mb - head_mb )); [ "$mem_mb" -ge 256 ] || mem_mb=256
fi
overrides=""
if [ -n "${SPECDEC_SLURM_CPUS:-}${SPECDEC_SLURM_MEM_MB:-}" ]; then overrides="SlurmdParameters=config_overrides"; fi
gres_node=""; gres_types=""
if [ "$NGPUS" -gt 0 ]; then gres_node=" Gres=gpu:$NGPUS"; gres_types="GresTypes=gpu"; fi
nodes_expr="specdec-n[1-$NNODES]"
node_lines=""; gres_lines=""; hosts_lines="$BRIDGE_IP $CTL $HOSTS_MARK
"
for i in $(seq 1 "$NNODES"); do
  node_lines+="NodeName=$(node_name "$i") NodeAddr=$(node_addr "$i") NodeHostname=$(node_name "$i") CPUs=$ncpu RealMemory=$mem_mb$gres_node State=UNKNOWN
"
  [ "$NGPUS" -gt 0 ] && gres_lines+="NodeName=$(node_name "$i") Name=gpu File=$DEVD/$(node_name "$i")/fakegpu[0-$(( NGPUS - 1 ))]
"
  hosts_lines+="$(node_addr "$i") $(node_name "$i") $HOSTS_MARK
"
done
slurm_conf="$MARK
# state: $STATE
ClusterName=specdecmulti
SlurmctldHost=$CTL($BRIDGE_IP)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=5
InactiveLimit=0
StateSaveLocation=$STATE/spool/ctld
SlurmdSpoolDir=$STATE/spool/%n
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$RUND/slurmd.%n.pid
SlurmctldLogFile=$LOGD/slurmctld.log
SlurmdLogFile=$LOGD/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
$gres_types
$overrides
$node_lines
PartitionName=debug Nodes=$nodes_expr Default=YES MaxTime=INFINITE State=UP
"
gres_conf="$MARK
AutoDetect=off
$gres_lines"

conf_same() {
  [ -f "$CONF" ] && [ "$(cat "$CONF")" = "$(printf '%s' "$slurm_conf")" ] &&
  [ -f "$GRES" ] && [ "$(cat "$GRES")" = "$(printf '%s' "$gres_conf")" ]
}
net_same() {
  local i
  ip link show "$BRIDGE" >/dev/null 2>&1 || return 1
  [ "$(our_netns | wc -l)" = "$NNODES" ] || return 1
  for i in $(seq 1 "$NNODES"); do
    [ -e "/run/netns/$(node_name "$i")" ] || return 1
    ip -n "$(node_name "$i")" -4 -o addr show dev eth0 2>/dev/null | grep -q " $(node_addr "$i")/24 " || return 1
  done
  [ "$(grep -F "$HOSTS_MARK" /etc/hosts 2>/dev/null || true)" = "$(printf '%s' "$hosts_lines" | sed '/^$/d')" ]
}
daemons_alive() {
  local i
  pid_alive "$CTLD_PID" slurmctld || return 1
  for i in $(seq 1 "$NNODES"); do pid_alive "$(slurmd_pidfile "$i")" slurmd || return 1; done
}
node_states() { sinfo -h -N -o '%N %T' 2>/dev/null || true; }
all_usable() {  # every node of ours answers and is schedulable
  local states n
  states="$(node_states)"
  n="$(printf '%s\n' "$states" | awk '$2 ~ /^(idle|mixed|allocated|completing)$/' | wc -l)"
  [ "$n" = "$NNODES" ]
}
status_line() {
  local addrs="" i
  for i in $(seq 1 "$NNODES"); do addrs+="${addrs:+,}$(node_name "$i")=$(node_addr "$i")"; done
  printf 'slurm: %s multi-node nodes=%s addrs=%s controller=%s:%s cpus=%s mem=%sMB gres=gpu:%s partition=debug SLURM_CONF=%s state_dir=%s (%ss)\n' \
    "$1" "$nodes_expr" "$addrs" "$BRIDGE_IP" "$CTLD_PORT" "$ncpu" "$mem_mb" "$NGPUS" "$CONF" "$STATE" "$(elapsed)"
}

# ------------------------------------------------------------------- up ---
up_network() {
  local i ns veth
  # Namespaces of an earlier, larger N go first (with what runs in them).
  for ns in $(our_netns); do
    i="${ns#specdec-n}"
    if [ "$i" -gt "$NNODES" ]; then
      stop_pid "$RUND/slurmd.$ns.pid" slurmd
      log "removing $ns (beyond SPECDEC_SLURM_NODES=$NNODES)"
      ip netns del "$ns" 2>/dev/null || true
      ip link del "specdec-v$i" 2>/dev/null || true
    fi
  done
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    log "creating bridge $BRIDGE $BRIDGE_IP/24"
    ip link add "$BRIDGE" type bridge
  fi
  ip addr show dev "$BRIDGE" | grep -q " $BRIDGE_IP/24 " || ip addr add "$BRIDGE_IP/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  for i in $(seq 1 "$NNODES"); do
    ns="$(node_name "$i")"; veth="$(veth_name "$i")"
    [ -e "/run/netns/$ns" ] || { log "creating network namespace $ns ($(node_addr "$i"))"; ip netns add "$ns"; }
    if ! ip -n "$ns" link show eth0 >/dev/null 2>&1; then
      ip link del "$veth" 2>/dev/null || true
      ip link add "$veth" type veth peer name eth0 netns "$ns"
    fi
    ip link set "$veth" master "$BRIDGE" up
    ip -n "$ns" link set lo up
    ip -n "$ns" -4 -o addr show dev eth0 | grep -q " $(node_addr "$i")/24 " ||
      ip -n "$ns" addr add "$(node_addr "$i")/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
  write_hosts "$hosts_lines"
}

start_munge() {
  munge_ok && return 0
  install -d -o munge -g munge -m 0700 /etc/munge /var/log/munge
  install -d -o munge -g munge -m 0711 /var/lib/munge
  install -d -o munge -g munge -m 0755 /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    log "creating /etc/munge/munge.key"
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  chown munge:munge /etc/munge/munge.key; chmod 0400 /etc/munge/munge.key
  log "starting munged"
  su -s /bin/sh munge -c munged </dev/null >>"$STATE/munged.out" 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- || true
  for _ in $(seq 1 50); do munge_ok && return 0; sleep 0.1; done
  su -s /bin/sh munge -c 'munged --force' </dev/null >>"$STATE/munged.out" 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- || true
  for _ in $(seq 1 50); do munge_ok && return 0; sleep 0.1; done
  die "munge does not work"
}

up() {
  if conf_same && net_same && daemons_alive && munge_ok && all_usable; then
    status_line "already up"; return 0
  fi
  for c in slurmctld slurmd sbatch munged nsenter unshare ip; do
    command -v "$c" >/dev/null 2>&1 ||
      die "$c not found: run common/setup/slurm_up.sh once (it installs slurm-wlm and munge), or apt-get install slurm-wlm munge iproute2 util-linux"
  done
  start_munge
  up_network
  mkdir -p "$STATE/spool/ctld" "$LOGD" "$RUND"
  local i dev clear_state=""
  for i in $(seq 1 "$NNODES"); do
    mkdir -p "$STATE/spool/$(node_name "$i")" "$DEVD/$(node_name "$i")"
    for g in $(seq 0 $(( NGPUS - 1 ))); do
      dev="$DEVD/$(node_name "$i")/fakegpu$g"
      [ -c "$dev" ] && continue
      rm -f "$dev"
      mknod -m 0666 "$dev" c 1 3 2>/dev/null || ln -s /dev/null "$dev"
    done
  done
  if ! conf_same; then
    printf '%s' "$slurm_conf" > "$CONF"
    printf '%s' "$gres_conf" > "$GRES"
    chmod 0644 "$CONF" "$GRES"
    if pid_alive "$CTLD_PID" slurmctld; then log "config changed: restarting the multi-node cluster"; fi
    for f in "$RUND"/slurmd.*.pid; do [ -e "$f" ] && stop_pid "$f" slurmd; done
    stop_pid "$CTLD_PID" slurmctld
    clear_state="-c"
  fi
  if ! pid_alive "$CTLD_PID" slurmctld; then
    log "starting slurmctld ($CTL, $BRIDGE_IP:$CTLD_PORT)"
    # Its own UTS namespace: slurmctld runs only where the hostname is SlurmctldHost's.
    # shellcheck disable=SC2086
    unshare --uts sh -c "hostname $CTL; exec slurmctld $clear_state -i -f '$CONF'" \
      </dev/null >>"$LOGD/daemons.out" 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- || fail "slurmctld failed to start"
  fi
  for i in $(seq 1 "$NNODES"); do
    local n; n="$(node_name "$i")"
    pid_alive "$(slurmd_pidfile "$i")" slurmd && continue
    log "starting slurmd on $n ($(node_addr "$i"):$SLURMD_PORT)"
    nsenter --net="/run/netns/$n" unshare --uts sh -c "hostname $n; exec slurmd -N $n -f '$CONF'" \
      </dev/null >>"$LOGD/daemons.out" 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- || fail "slurmd on $n failed to start"
  done
  local deadline last_resume=0 now st
  deadline=$(( $(date +%s) + TIMEOUT ))
  while ! all_usable; do
    pid_alive "$CTLD_PID" slurmctld || fail "slurmctld exited"
    for i in $(seq 1 "$NNODES"); do pid_alive "$(slurmd_pidfile "$i")" slurmd || fail "slurmd on $(node_name "$i") exited"; done
    st="$(node_states | tr '\n' ' ')"
    case "$st" in *inval*) fail "a slurmd registered with a config its node does not match ($st)";; esac
    now=$(date +%s)
    if printf '%s' "$st" | grep -qE '(down|drain|fail)' && [ $(( now - last_resume )) -ge 2 ]; then
      log "nodes: $st; resuming"
      scontrol update nodename="$nodes_expr" state=resume >/dev/null 2>&1 || true
      last_resume=$now
    fi
    [ "$now" -lt "$deadline" ] || fail "nodes not idle after ${TIMEOUT}s (${st:-no answer from slurmctld})"
    sleep 0.2
  done
  status_line "up"
}

case "$ACTION" in
  up) up ;;
  down) down ;;
  status)
    if conf_same && net_same && daemons_alive && all_usable; then status_line "up"; else echo "slurm: down multi-node"; exit 1; fi ;;
  *) die "unknown action '$ACTION' (up, down, status)" ;;
esac
