#!/usr/bin/env bash
# Test hosts as network namespaces (see docs/architecture.md, "Test hosts").
#
#   ci/netns-cluster.sh up [PREFIX [N]]         create hosts PREFIXh0 .. PREFIXh(N-1) (default: h0..h3)
#   ci/netns-cluster.sh down [PREFIX]           remove them, their bridges and their loss rules
#   ci/netns-cluster.sh list                    namespaces and bridges that look like ours
#   ci/netns-cluster.sh loss HOST PERCENT [IF]  drop PERCENT % of the UDP and TCP packets HOST receives
#                                               on its data interfaces (or only on IF); 0 removes it
#   ci/netns-cluster.sh link HOST IF up|down    set one of HOST's interfaces up or down
#
# Each host has these interfaces, each on a bridge in the root namespace:
#   eth0  management  198.18.0.(10+i)/24   bridge kbPREFIXm (the root namespace is 198.18.0.1)
#   eth1  data 1      198.18.1.(10+i)/24   bridge kbPREFIXd1
#   eth2  data 2      198.18.2.(10+i)/24   bridge kbPREFIXd2
# and the last host has one more, on a subnet nobody else has (it must never be paired):
#   eth3  data 3      198.18.3.(10+i)/24   bridge kbPREFIXd3 (no other member)
# All addresses are in the RFC 2544 benchmarking range 198.18.0.0/15; traffic never leaves the
# machine. PREFIX must be at most 8 characters (interface names are limited to 15). Loss comes
# from an nftables `numgen random` rule in the host's own namespace (table inet kestrel_loss),
# so it disappears with the namespace.
set -euo pipefail

usage() {
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

bridge() { echo "kb${1}$2"; }

up() {
  local prefix=$1 n=$2
  [ ${#prefix} -le 8 ] || { echo "netns-cluster: prefix '$prefix' is longer than 8 characters" >&2; exit 2; }
  [[ "$n" =~ ^[1-9]$ ]] || { echo "netns-cluster: host count '$n' must be 1..9" >&2; exit 2; }
  if ip -o addr show | grep -q ' 198\.18\.0\.1/24 '; then
    echo "netns-cluster: 198.18.0.1/24 is already assigned (another cluster is up: '$0 list', then '$0 down PREFIX')" >&2
    exit 1
  fi
  # Remove what we created if any step fails, so a failed 'up' leaves nothing behind.
  trap 'down "$prefix" >/dev/null 2>&1 || true' ERR
  local m
  m=$(bridge "$prefix" m)
  ip link add "$m" type bridge
  ip link set "$m" up
  ip addr add 198.18.0.1/24 dev "$m"
  for d in d1 d2 d3; do
    ip link add "$(bridge "$prefix" $d)" type bridge
    ip link set "$(bridge "$prefix" $d)" up
  done
  for ((i = 0; i < n; i++)); do
    local ns="${prefix}h$i" last=2
    [ "$i" = $((n - 1)) ] && last=3
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # A connection a killed rank left half-closed keeps retransmitting to a host that is gone,
    # and holds its namespace (and the root-side veth names) alive for minutes after `down`:
    # give up on such orphans at once.
    ip netns exec "$ns" sh -c 'echo 1 >/proc/sys/net/ipv4/tcp_orphan_retries' 2>/dev/null || true
    for ((j = 0; j <= last; j++)); do
      local outer="kv${prefix}h${i}e$j" br
      if [ "$j" = 0 ]; then br=$(bridge "$prefix" m); else br=$(bridge "$prefix" "d$j"); fi
      ip link add "$outer" type veth peer name "eth$j" netns "$ns"
      ip link set "$outer" master "$br" up
      ip -n "$ns" addr add "198.18.$j.$((10 + i))/24" dev "eth$j"
      ip -n "$ns" link set "eth$j" up
    done
  done
  # veth carriers come up asynchronously: wait (bounded) until every interface has one, so
  # that a job started right after 'up' does not see a data interface as down.
  local tries=0
  until all_carriers "$prefix" "$n"; do
    tries=$((tries + 1))
    [ "$tries" -lt 100 ] || { echo "netns-cluster: interfaces still without carrier after 5 s" >&2; break; }
    sleep 0.05
  done
  trap - ERR
}

all_carriers() {
  local prefix=$1 n=$2 i
  ip -o link show | grep "kv${prefix}h" | grep -qv LOWER_UP && return 1
  for ((i = 0; i < n; i++)); do
    ip -n "${prefix}h$i" -o link show | grep ' eth' | grep -qv LOWER_UP && return 1
  done
  return 0
}

down() {
  local prefix=$1
  for ns in $(ip netns list | awk '{print $1}' | grep "^${prefix}h[0-9]*$" || true); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns"
  done
  for d in m d1 d2 d3; do
    ip link del "$(bridge "$prefix" $d)" 2>/dev/null || true
  done
}

loss() {
  local host=$1 percent=$2 iface=${3:-}
  [[ "$percent" =~ ^[0-9]+$ ]] && [ "$percent" -le 100 ] || { echo "netns-cluster: loss '$percent' must be a whole percentage 0..100" >&2; exit 2; }
  command -v nft >/dev/null || { echo "netns-cluster: nft not found; apt-get install nftables" >&2; exit 1; }
  ip netns exec "$host" nft delete table inet kestrel_loss 2>/dev/null || true
  [ "$percent" = 0 ] && return 0
  local match='iifname != { "lo", "eth0" }'
  [ -n "$iface" ] && match="iifname \"$iface\""
  ip netns exec "$host" nft -f - <<EOF
table inet kestrel_loss {
  chain input {
    type filter hook input priority 0; policy accept;
    $match meta l4proto { udp, tcp } numgen random mod 100 < $percent counter drop
  }
}
EOF
}

link() {
  local host=$1 iface=$2 state=$3
  case "$state" in up|down) ;; *) usage ;; esac
  ip -n "$host" link set "$iface" "$state"
}

case "${1:-}" in
  up) [ $# -le 3 ] || usage; up "${2:-}" "${3:-4}" ;;
  down) [ $# -le 2 ] || usage; down "${2:-}" ;;
  list) ip netns list; ip -o link show type bridge | awk -F': ' '{print $2}' | grep '^kb' || true ;;
  loss) [ $# -ge 3 ] && [ $# -le 4 ] || usage; loss "$2" "$3" "${4:-}" ;;
  link) [ $# -eq 4 ] || usage; link "$2" "$3" "$4" ;;
  *) usage ;;
esac
