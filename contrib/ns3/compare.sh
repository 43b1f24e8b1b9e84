#!/bin/sh
# compare.sh: simulated packets per wall-clock second, ns-3 against inaemu,
# on the same 8-host 10 Gbit/s star (see README.md in this directory).
#
# Needs: g++, pkg-config, Debian's libns3-dev, and an inaemu binary on PATH
# (or INAEMU=/path/to/inaemu). Run from anywhere: sh contrib/ns3/compare.sh
# Environment: CXX (default g++), CXXFLAGS (default -O2), INAEMU (default
# inaemu), KEEP=1 keeps the build directory.
set -e

here=$(cd "$(dirname "$0")" && pwd)
CXX=${CXX:-g++}
CXXFLAGS=${CXXFLAGS:--O2}
INAEMU=${INAEMU:-inaemu}

command -v "$CXX" >/dev/null 2>&1 || { echo "compare.sh: $CXX not found" >&2; exit 2; }
command -v "$INAEMU" >/dev/null 2>&1 || {
	echo "compare.sh: $INAEMU not found; build one: go build -o /tmp/inaemu ./cmd/inaemu, then INAEMU=/tmp/inaemu" >&2
	exit 2
}

# Compiler and linker flags for ns-3. Debian's 3.37 .pc files carry a stray
# "-I/usr;" and name libgsl.so/libgslcblas.so, which exist only with
# libgsl-dev; drop such words (star.cc uses neither).
mods="ns3-core ns3-network ns3-internet ns3-point-to-point ns3-applications ns3-traffic-control"
if pkg-config --exists $mods 2>/dev/null; then
	raw="$(pkg-config --cflags --libs $mods)"
else
	echo "compare.sh: no pkg-config files for ns-3; trying plain -lns3-* (apt-get install libns3-dev)" >&2
	raw="-I/usr/include -lns3-point-to-point -lns3-applications -lns3-internet -lns3-traffic-control -lns3-network -lns3-core"
fi
nsflags=
for w in $raw; do
	case $w in
	*\;* | *\\*) continue ;;
	/*.so | /*.so.*) [ -e "$w" ] || continue ;;
	-I*) [ -d "${w#-I}" ] || continue ;;
	esac
	nsflags="$nsflags $w"
done

build=$(mktemp -d "${TMPDIR:-/tmp}/ns3star.XXXXXX")
if [ "${KEEP:-0}" != 1 ]; then
	trap 'rm -rf "$build"' EXIT
fi
# shellcheck disable=SC2086 # nsflags and CXXFLAGS are word lists
"$CXX" $CXXFLAGS -std=c++17 -o "$build/star" "$here/star.cc" $nsflags

echo "== ns-3: $build/star (8 hosts, 10Gbps, 1us, 64 MiB each, 1024 B UDP datagrams)"
nsline=$("$build/star")
echo "$nsline"
ns_pps=$(echo "$nsline" | sed -n 's/.* \([0-9][0-9]*\) packets\/wall-s.*/\1/p')
ns_fps=$(echo "$nsline" | sed -n 's/.* \([0-9][0-9]*\) link-frames\/wall-s.*/\1/p')
[ -n "$ns_pps" ] && [ -n "$ns_fps" ] || { echo "compare.sh: cannot parse ns-3 output" >&2; exit 1; }

echo "== inaemu: $INAEMU run --workers 8 --tensor 64MiB --seed 1 --json"
json=$("$INAEMU" run --workers 8 --tensor 64MiB --seed 1 --json)
# The first "frames_sent" and "virtual_ns" are the run's totals (each job
# repeats them later); the switch's counters sit in "switch":{...}.
first() { echo "$json" | grep -o "\"$1\":[0-9][0-9]*" | head -n 1 | sed 's/.*://'; }
frames=$(first frames_sent)
wall_ns=$(first wall_ns)
virtual_ns=$(first virtual_ns)
sw=$(echo "$json" | sed -n 's/.*"switch":{\([^}]*\)}.*/\1/p')
swnum() { echo "$sw" | grep -o "\"$1\":[0-9][0-9]*" | head -n 1 | sed 's/.*://'; }
sw_in=$(swnum frames)
sw_fwd=$(swnum forwarded)
sw_flood=$(swnum flooded)
[ -n "$frames" ] && [ -n "$wall_ns" ] && [ -n "$virtual_ns" ] || {
	echo "compare.sh: cannot parse inaemu JSON: $json" >&2
	exit 1
}

awk -v f="$frames" -v w="$wall_ns" -v v="$virtual_ns" \
	-v si="${sw_in:-0}" -v sf="${sw_fwd:-0}" -v sd="${sw_flood:-0}" \
	-v npps="$ns_pps" -v nfps="$ns_fps" 'BEGIN {
	ws = w / 1e9
	lf = si + sf + sd * 7
	ipps = f / ws
	ifps = lf / ws
	printf "inaemu: %d frames sent by hosts (%d link frames) in %.6f s virtual, %.3f s wall: %.0f frames/wall-s, %.0f link-frames/wall-s\n", f, lf, v / 1e9, ws, ipps, ifps
	print "== side by side (simulated packets per wall-clock second)"
	printf "%-30s %14s %14s %8s\n", "", "ns-3", "inaemu", "inaemu/ns-3"
	printf "%-30s %14.0f %14.0f %8.2f\n", "host packets/wall-s", npps, ipps, ipps / npps
	printf "%-30s %14.0f %14.0f %8.2f\n", "link frames/wall-s", nfps, ifps, ifps / nfps
}'
