#!/usr/bin/env bash
# Runs a command with a throwaway PostgreSQL server on 127.0.0.1, its DSN in
# WARDEN_TEST_PG_DSN. Installs Debian's postgresql when missing. The server
# and its data are removed when the command ends.
set -euo pipefail

pgbin=""
find_pg() { pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true); }
find_pg
if [ -z "$pgbin" ] || [ ! -x "$pgbin/initdb" ]; then
	echo "with-postgres: installing postgresql (Debian package)" >&2
	if [ "$(id -u)" -eq 0 ]; then
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
	else
		sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
	fi
	find_pg
fi

dir=$(mktemp -d /tmp/warden-pg.XXXXXX)
port=$(( 20000 + RANDOM % 20000 ))
as_pg=()
if [ "$(id -u)" -eq 0 ]; then
	# initdb refuses to run as root: run the server as the postgres user.
	chown postgres "$dir"
	as_pg=(runuser -u postgres --)
fi
cleanup() {
	"${as_pg[@]}" "$pgbin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT
"${as_pg[@]}" "$pgbin/initdb" -D "$dir/data" -A trust -U warden >/dev/null
"${as_pg[@]}" "$pgbin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 30 \
	-o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c fsync=off" start >/dev/null
export WARDEN_TEST_PG_DSN="postgres://warden@127.0.0.1:$port/postgres?sslmode=disable"
"$@"
