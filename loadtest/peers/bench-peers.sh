#!/bin/sh
# Installs the peers from Debian when missing (apt-get update once), then runs
# peerbench against Warden and every peer that is available. Usage (from the
# repository root): loadtest/peers/bench-peers.sh bin/warden build/bench [peerbench flags]
set -u
bin=$1; out=$2; shift 2
missing=""
for pkg in etcd-server zookeeper redis-server; do
	dpkg -s "$pkg" >/dev/null 2>&1 || missing="$missing $pkg"
done
if [ -n "$missing" ]; then
	[ "$(id -u)" = 0 ] && sudo="" || sudo="sudo"
	$sudo apt-get update -qq || echo "bench-peers: apt-get update failed"
	for pkg in $missing; do
		if [ -z "$(apt-cache policy "$pkg" 2>/dev/null | grep 'Candidate:' | grep -v '(none)')" ]; then
			echo "bench-peers: package $pkg has no installation candidate in the configured apt sources; skipping it"
			continue
		fi
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$pkg" >/dev/null || echo "bench-peers: installing $pkg failed"
	done
fi
systems=warden
dpkg -s etcd-server >/dev/null 2>&1 && systems="$systems,etcd" || echo "bench-peers: etcd-server missing: etcd not run"
dpkg -s zookeeper >/dev/null 2>&1 && systems="$systems,zookeeper" || echo "bench-peers: zookeeper missing: ZooKeeper not run"
dpkg -s redis-server >/dev/null 2>&1 && systems="$systems,redis" || echo "bench-peers: redis-server missing: Redis not run"
root=$(pwd)
cd loadtest/peers && exec go run ./cmd/peerbench --warden "$root/$bin" --out "$root/$out" --systems "$systems" "$@"
