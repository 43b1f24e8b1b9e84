#!/bin/sh
# ovs-dut.sh: Open vSwitch as inaemu's device under test (docs/dut-ovs.md).
#
#   inaemu tap up --wired --prefix ovs --workers 4
#   inaemu run --dut tap:ovs --dut-cmd 'exec examples/devices/ovs/ovs-dut.sh' --mode ring --workers 4 ...
#
# It starts a private Open vSwitch (its own ovsdb-server and ovs-vswitchd,
# database, sockets, pid and log files in a new temporary directory; the
# system's Open vSwitch, if any, is not touched), makes a bridge on the
# userspace datapath whose ports are the device ports $INAEMU_DUT_PREFIX-sw0
# .. -sw(N-1) (N = $INAEMU_DUT_WORKERS), prints "ready" once ovs-vswitchd has
# applied the configuration, and runs until it is stopped. Every port is
# an OpenFlow port r+1 of type tap: ovs-vswitchd opens the TAP that
# `inaemu tap up --wired` made and reads and writes its frames itself.
#
# Options:
#   --bridges 1|2           one bridge (default), or two joined by a patch
#                           port pair: ranks 0..ceil(N/2)-1 on the first,
#                           the others on the second
#   --datapath dummy|netdev the userspace datapath's type name. dummy
#                           (default) is dpif-netdev registered under another
#                           name (ovs-vswitchd --enable-dummy): the same
#                           code, without the kernel TAPs the netdev type
#                           makes for the datapath (ovs-netdev, one per
#                           host) and each bridge's internal port, so
#                           several can run side by side and none leaves an
#                           interface behind. netdev: the usual name; one
#                           per host, its interfaces removed on a clean stop.
#   --hub                   flood every frame (OpenFlow action FLOOD) instead
#                           of the learning switch (NORMAL)
#   --mtu N                 mtu_request=N on every device port, 68..65521
#                           (a TAP's range; default: the TAP's MTU, 9000 as
#                           `inaemu tap up` makes it). It changes the TAPs'
#                           own MTU, restored on a clean stop; after a
#                           SIGKILL the next start restores it (the old
#                           MTUs are recorded in the run's directory), or
#                           `inaemu tap down` removes the TAPs.
#   --mac-aging S           the bridges' MAC aging time (OVS default 300 s)
#
# Stopping: SIGTERM or SIGINT (inaemu sends SIGTERM to the command's process
# group) stops both daemons, removes what the run made and exits 0. The
# daemons are this shell's children with a parent-death signal (setpriv
# --pdeathsig KILL), so a SIGKILL of this shell (inaemu's own parent-death
# signal when inaemu dies) kills them too; the temporary directory it
# could not remove is removed by the next run (it names its owner's pid),
# and the TAPs' MTUs it changed (--mtu) are restored then.
#
# Bad flags and values: one line on stderr, exit 2.
set -eu

me=ovs-dut.sh
synopsis="$me [--bridges 1|2] [--datapath dummy|netdev] [--hub] [--mtu N] [--mac-aging SECONDS]"
bad() { # a usage error: one line, exit 2
	echo "$me: $* (usage: $synopsis)" >&2
	exit 2
}
bridges=1 datapath=dummy action=NORMAL mtu= aging=
while [ $# -gt 0 ]; do
	case $1 in
	--bridges | --datapath | --mtu | --mac-aging)
		[ $# -ge 2 ] || bad "$1 needs a value"
		case $1 in
		--bridges) bridges=$2 ;;
		--datapath) datapath=$2 ;;
		--mtu) mtu=$2 ;;
		--mac-aging) aging=$2 ;;
		esac
		shift 2
		;;
	--hub) action=FLOOD; shift ;;
	-h | --help) echo "usage: $synopsis"; exit 0 ;;
	*) bad "unknown argument $1" ;;
	esac
done
case $bridges in 1 | 2) ;; *) echo "$me: --bridges $bridges: want 1 or 2" >&2; exit 2 ;; esac
case $datapath in dummy | netdev) ;; *) echo "$me: --datapath $datapath: want dummy or netdev" >&2; exit 2 ;; esac
case $mtu in
'') ;;
*[!0-9]* | 0*) echo "$me: --mtu $mtu: want a whole number of bytes, 68..65521" >&2; exit 2 ;;
*) # a TAP takes 68 (IPv4's least) to 65521 (65535 less the Ethernet header)
	[ ${#mtu} -le 5 ] && [ "$mtu" -ge 68 ] && [ "$mtu" -le 65521 ] ||
		{ echo "$me: --mtu $mtu: want 68..65521 (a TAP's range)" >&2; exit 2; } ;;
esac
case $aging in '' | *[!0-9]*) [ -z "$aging" ] || { echo "$me: --mac-aging $aging: want seconds" >&2; exit 2; } ;; esac
prefix=${INAEMU_DUT_PREFIX:?$me: INAEMU_DUT_PREFIX is not set (inaemu sets it for a --dut-cmd)}
workers=${INAEMU_DUT_WORKERS:?$me: INAEMU_DUT_WORKERS is not set (inaemu sets it for a --dut-cmd)}
for tool in ovsdb-tool ovsdb-server ovs-vswitchd ovs-vsctl ovs-ofctl; do
	command -v $tool >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin
	command -v $tool >/dev/null 2>&1 || { echo "$me: $tool not found (Debian: apt-get install openvswitch-switch)" >&2; exit 1; }
done
schema=${OVS_SCHEMA:-/usr/share/openvswitch/vswitch.ovsschema}
[ -r "$schema" ] || { echo "$me: no Open vSwitch schema at $schema (set OVS_SCHEMA)" >&2; exit 1; }
r=0
while [ $r -lt "$workers" ]; do
	[ -e "/sys/class/net/$prefix-sw$r" ] || { echo "$me: no device port $prefix-sw$r (inaemu tap up --wired --prefix $prefix --workers $workers)" >&2; exit 1; }
	r=$((r + 1))
done
if [ $datapath = netdev ] && [ -e /sys/class/net/ovs-netdev ]; then
	echo "$me: the interface ovs-netdev exists: an Open vSwitch with a netdev datapath runs on this host, or one was killed (ip link del ovs-netdev); use --datapath dummy" >&2
	exit 1
fi

# Temporary directories of runs whose shell was killed: their owner is
# gone (or a zombie nobody reaped yet).
tmp=${TMPDIR:-/tmp}
alive() { [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status"; }
for old in "$tmp"/inaemu-ovs.*; do
	[ -f "$old/owner" ] || continue
	alive "$(cat "$old/owner")" && continue
	# The TAPs' MTUs a killed run's --mtu changed (PORT=MTU words): back
	# first, so this run's ports start from what they were.
	if [ -f "$old/mtus" ]; then
		for pm in $(cat "$old/mtus"); do ip link set dev "${pm%=*}" mtu "${pm#*=}" 2>/dev/null || true; done
	fi
	rm -rf "$old"
done
dir=$(mktemp -d "$tmp/inaemu-ovs.XXXXXX")
echo $$ >"$dir/owner"
# Every file either daemon or tool reads or writes is under dir.
export OVS_RUNDIR="$dir" OVS_DBDIR="$dir" OVS_LOGDIR="$dir" OVS_SYSCONFDIR="$dir"

pids=
made= # kernel interfaces OVS makes and leaves behind (netdev datapath)
mtus= # PORT=MTU: the device ports' MTUs before --mtu changed them
cleanup() {
	trap - EXIT INT TERM
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	for p in $pids; do wait "$p" 2>/dev/null || true; done
	for i in $made; do ip link del "$i" 2>/dev/null || true; done
	# mtu_request changed the TAPs' own MTU, which outlives OVS: restore it.
	for pm in $mtus; do ip link set dev "${pm%=*}" mtu "${pm#*=}" 2>/dev/null || true; done
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

daemon() { # runs a daemon as this shell's child, killed if this shell dies
	if command -v setpriv >/dev/null 2>&1; then
		setpriv --pdeathsig KILL "$@" &
	else
		"$@" &
	fi
	pids="$pids $!"
}

db=unix:$dir/db.sock
vsctl() { ovs-vsctl --db="$db" --timeout=30 "$@"; }
ovsdb-tool create "$dir/conf.db" "$schema"
daemon ovsdb-server "$dir/conf.db" --remote=punix:"$dir/db.sock" --pidfile="$dir/ovsdb-server.pid" \
	--unixctl="$dir/ovsdb-server.ctl" --log-file="$dir/ovsdb-server.log" -vconsole:warn
# Wait for ovsdb-server to listen (ovs-vsctl --retry would wait whole
# seconds between attempts).
i=0
until ovs-vsctl --db="$db" --timeout=5 --no-wait init 2>/dev/null; do
	i=$((i + 1))
	[ $i -lt 600 ] || { ovs-vsctl --db="$db" --timeout=5 --no-wait init; exit 1; }
	sleep 0.05
done
# ovs-vswitchd only now: one that finds no database yet retries a second later.
dummy=
[ $datapath = dummy ] && dummy=--enable-dummy
daemon ovs-vswitchd $dummy "$db" --pidfile="$dir/ovs-vswitchd.pid" \
	--unixctl="$dir/ovs-vswitchd.ctl" --log-file="$dir/ovs-vswitchd.log" -vconsole:warn
vswitchd=$!

# The bridges, ranks split between them, and their flows.
half=$(((workers + 1) / 2))
[ $bridges = 2 ] || half=$workers
[ $datapath = netdev ] && made="ovs-netdev"
b=0
while [ $b -lt $bridges ]; do
	br=$prefix-br$b
	args="-- add-br $br -- set bridge $br datapath_type=$datapath fail_mode=secure"
	[ -n "$aging" ] && args="$args other_config:mac-aging-time=$aging"
	[ $datapath = netdev ] && made="$made $br"
	r=0
	while [ $r -lt "$workers" ]; do
		if { [ $b = 0 ] && [ $r -lt $half ]; } || { [ $b = 1 ] && [ $r -ge $half ]; }; then
			args="$args -- add-port $br $prefix-sw$r -- set interface $prefix-sw$r type=tap ofport_request=$((r + 1))"
			if [ -n "$mtu" ]; then
				args="$args mtu_request=$mtu"
				mtus="$mtus $prefix-sw$r=$(cat "/sys/class/net/$prefix-sw$r/mtu")"
			fi
		fi
		r=$((r + 1))
	done
	# Recorded before OVS changes them, for the next start if this shell
	# is killed before its cleanup runs.
	[ -z "$mtus" ] || echo "$mtus" >"$dir/mtus"
	# shellcheck disable=SC2086 # args is a list of words
	vsctl $args
	b=$((b + 1))
done
if [ $bridges = 2 ]; then
	vsctl -- add-port "$prefix-br0" patch01 -- set interface patch01 type=patch options:peer=patch10 ofport_request=100 \
		-- add-port "$prefix-br1" patch10 -- set interface patch10 type=patch options:peer=patch01 ofport_request=100
fi
b=0
while [ $b -lt $bridges ]; do
	ovs-ofctl del-flows "$prefix-br$b"
	ovs-ofctl add-flow "$prefix-br$b" "actions=$action"
	b=$((b + 1))
done
# The netdev datapath's bridge ports are TAPs OVS makes persistent: give
# them the device ports' alias (inaemu's), so `inaemu tap down` and the
# sweep of a killed run's interfaces remove them with the ports.
alias=$(cat "/sys/class/net/$prefix-sw0/ifalias" 2>/dev/null || true)
if [ $datapath = netdev ] && [ -n "$alias" ]; then
	b=0
	while [ $b -lt $bridges ]; do
		ip link set dev "$prefix-br$b" alias "$alias" 2>/dev/null || true
		b=$((b + 1))
	done
fi

# Ready once every port has its OpenFlow number and no error.
ports=
r=0
while [ $r -lt "$workers" ]; do
	p=$prefix-sw$r
	n=$(vsctl get interface "$p" ofport)
	err=$(vsctl get interface "$p" error 2>/dev/null || true)
	if [ "$n" != $((r + 1)) ] || { [ -n "$err" ] && [ "$err" != '[]' ]; }; then
		echo "$me: $p: OpenFlow port $n, error $err" >&2
		exit 1
	fi
	ports="$ports $p"
	r=$((r + 1))
done
version=$(ovs-vswitchd --version | sed -n '1s/.*) //p')
shape="one bridge"
ranks() { if [ "$1" = "$2" ]; then echo "rank $1"; else echo "ranks $1-$2"; fi; }
[ $bridges = 2 ] && shape="two bridges joined by a patch port ($prefix-br0: $(ranks 0 $((half - 1))), $prefix-br1: $(ranks $half $((workers - 1))))"
echo "ready: Open vSwitch $version, $datapath datapath, $shape, actions=$action, ports$ports"

wait $vswitchd || st=$?
echo "$me: ovs-vswitchd exited (status ${st:-0})" >&2
exit 1
