#!/usr/bin/env bash
# Two hosts on one machine: runs a torchrun job across two network
# namespaces joined by a veth pair, each namespace with its own address
# (10.77.X.1 and 10.77.X.2), torchrun's c10d rendezvous on the first one's
# address (it hosts the store: both namespaces share the hostname, so
# torchrun cannot tell by name), Gloo (and so the neuron backend's data)
# over the veth link.
#
#   scripts/two_hosts.sh [--nproc-per-host N] SCRIPT [ARGS...]
#
# Needs root (ip netns).  Everything it creates is removed on exit, also on
# failure or interruption.  Exit status: the first failing host's, else 0.
set -euo pipefail

nproc=1
if [[ "${1:-}" == "--nproc-per-host" ]]; then
	nproc="$2"
	shift 2
fi
if [[ $# -lt 1 ]]; then
	echo "usage: $0 [--nproc-per-host N] SCRIPT [ARGS...]" >&2
	exit 2
fi
if ! command -v ip > /dev/null; then
	echo "$0: needs iproute2's ip" >&2
	exit 1
fi

tag=$(( $$ % 250 + 1 ))                    # a subnet and names of this run's own
ns0="nsim-h0-$$" ns1="nsim-h1-$$"
if0="nsv${tag}a" if1="nsv${tag}b"
addr0="10.77.${tag}.1" addr1="10.77.${tag}.2"
port=$(( 29000 + $$ % 1000 ))

cleanup() {
	ip netns del "$ns0" 2> /dev/null || true
	ip netns del "$ns1" 2> /dev/null || true   # deleting a namespace removes its veth end
}
trap cleanup EXIT INT TERM

ip netns add "$ns0"
ip netns add "$ns1"
ip link add "$if0" type veth peer name "$if1"
ip link set "$if0" netns "$ns0"
ip link set "$if1" netns "$ns1"
ip -n "$ns0" addr add "$addr0/24" dev "$if0"
ip -n "$ns1" addr add "$addr1/24" dev "$if1"
ip -n "$ns0" link set lo up
ip -n "$ns1" link set lo up
ip -n "$ns0" link set "$if0" up
ip -n "$ns1" link set "$if1" up

host() {   # host INDEX NAMESPACE INTERFACE ADDRESS SCRIPT ARGS...
	local i="$1" ns="$2" ifname="$3" addr="$4"
	shift 4
	ip netns exec "$ns" env GLOO_SOCKET_IFNAME="$ifname" NSIM_HOST_ADDR="$addr" \
		python3 -m torch.distributed.run --nnodes 2 --node-rank "$i" --nproc-per-node "$nproc" \
		--rdzv-backend c10d --rdzv-id "nsim$$" --rdzv-endpoint "$addr0:$port" --local-addr "$addr" \
		--rdzv-conf "is_host=$(( i == 0 ))" "$@"
}

host 0 "$ns0" "$if0" "$addr0" "$@" &
p0=$!
host 1 "$ns1" "$if1" "$addr1" "$@" &
p1=$!
st0=0 st1=0
wait "$p0" || st0=$?
wait "$p1" || st1=$?
if [[ $st0 -ne 0 ]]; then exit "$st0"; fi
exit "$st1"
