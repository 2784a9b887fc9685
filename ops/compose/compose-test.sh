#!/bin/sh
# compose-test: build the image, start the compose cluster (3 nodes + a
# router), take a lock through the router with the CLI, kill one node's
# container and show the cluster still grants locks. Always cleans up.
# Run from the repository root after `make build` (the Makefile does both).
set -eu

BIN=${BIN:-bin/warden}
FILE=ops/compose/docker-compose.yml
PROJECT=${PROJECT:-wardencomposetest}
export WARDEN_IMAGE=${WARDEN_IMAGE:-warden:compose-test}
export WARDEN_ROUTER_PORT=${WARDEN_ROUTER_PORT:-17060}
export WARDEN_ADMIN_PORT1=17271 WARDEN_ADMIN_PORT2=17272 WARDEN_ADMIN_PORT3=17273
EP=127.0.0.1:$WARDEN_ROUTER_PORT

if docker compose version >/dev/null 2>&1; then
	compose() { docker compose -p "$PROJECT" -f "$FILE" "$@"; }
elif command -v docker-compose >/dev/null 2>&1; then
	compose() { docker-compose -p "$PROJECT" -f "$FILE" "$@"; }
else
	echo "compose-test: needs docker compose or docker-compose" >&2
	exit 1
fi

step() { printf '\n== %s\n' "$*"; }

cleanup() {
	status=$?
	if [ $status -ne 0 ]; then
		step "FAILED; last logs"
		compose logs --tail 30 2>&1 || true
	fi
	step "cleaning up"
	compose down -v --remove-orphans >/dev/null 2>&1 || true
	docker rmi "$WARDEN_IMAGE" >/dev/null 2>&1 || true
	rm -rf build/image
	exit $status
}
trap cleanup EXIT INT TERM

# retry SECONDS CMD...: run CMD until it succeeds or SECONDS pass.
retry() {
	limit=$1
	shift
	start=$(date +%s)
	until "$@"; do
		if [ $(($(date +%s) - start)) -ge "$limit" ]; then
			echo "gave up after ${limit}s: $*" >&2
			return 1
		fi
		sleep 1
	done
}

step "building image $WARDEN_IMAGE from $BIN (FROM scratch)"
rm -rf build/image && mkdir -p build/image/data
cp "$BIN" build/image/warden
docker build -q -t "$WARDEN_IMAGE" -f ops/Dockerfile build/image

step "starting 3 nodes and a router"
compose up -d

step "waiting for the cluster to serve through the router ($EP)"
retry 90 "$BIN" --endpoints "$EP" --timeout 3s kv put /compose/ready yes >/dev/null 2>&1
"$BIN" --endpoints "$EP" status

step "taking a lock through the router"
"$BIN" --endpoints "$EP" lock --try /compose/demo/job -- sh -c 'echo "granted $WARDEN_LOCK_PATH token=$WARDEN_LOCK_TOKEN"'

step "killing warden2"
compose kill warden2

step "the cluster still grants locks with one node down"
retry 60 "$BIN" --endpoints "$EP" --timeout 5s lock --try /compose/demo/after-kill -- sh -c 'echo "granted $WARDEN_LOCK_PATH token=$WARDEN_LOCK_TOKEN"'
"$BIN" --endpoints "$EP" kv get /compose/ready
"$BIN" --endpoints "$EP" status
if command -v curl >/dev/null; then
	step "warden1 admin port: readiness and a few metrics"
	retry 30 curl -fsS "http://127.0.0.1:$WARDEN_ADMIN_PORT1/readyz?verbose"
	curl -fsS "http://127.0.0.1:$WARDEN_ADMIN_PORT1/metrics" | grep -E '^warden_(raft_has_leader|requests_total)' | head -8
fi

step "compose-test passed"
