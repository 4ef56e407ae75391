#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests (Debian's postgresql): never the machine's own.
#
#   scripts/postgres-cluster.sh start DIR PORT PASSWORD [OWNER_PID]
#       initdb in DIR (as the postgres user when run as root), user `haul` with PASSWORD
#       (scram-sha-256), listening on 127.0.0.1:PORT only; with OWNER_PID, the cluster is stopped
#       and DIR removed when that process ends, however it ends.
#   scripts/postgres-cluster.sh down DIR | up DIR
#       stops the server, keeping its data; starts it again as before (a database restart mid-run)
#   scripts/postgres-cluster.sh stop DIR
set -euo pipefail
bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
[ -x "$bin/initdb" ] || { echo "postgres-cluster: PostgreSQL is not installed (apt-get install postgresql)" >&2; exit 1; }
as_owner() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
case "$1" in
start)
    dir=$2 port=$3 password=$4 owner=${5:-}
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    chmod 700 "$dir"
    printf '%s\n' "$password" > "$dir/password"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir/password"
    as_owner "$bin/initdb" -D "$dir/data" -U haul --pwfile="$dir/password" -A scram-sha-256 -E UTF8 \
        > "$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    rm -f "$dir/password"
    # fsync off: the tests check Haul's queue, not PostgreSQL's durability.
    echo "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300" > "$dir/options"
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o "$(cat "$dir/options")" start > /dev/null \
        || { cat "$dir/server.log" >&2; exit 1; }
    if [ -n "$owner" ]; then
        # tail --pid waits for the owner to end without holding it up.
        setsid bash -c "tail --pid=$owner -f /dev/null; $(declare -f as_owner); \
            as_owner '$bin/pg_ctl' -D '$dir/data' -m immediate -w stop; rm -rf '$dir'" > /dev/null 2>&1 < /dev/null &
    fi
    ;;
down)
    as_owner "$bin/pg_ctl" -D "$2/data" -m fast -w stop > /dev/null
    ;;
up)
    as_owner "$bin/pg_ctl" -D "$2/data" -l "$2/server.log" -w -t 60 -o "$(cat "$2/options")" start > /dev/null
    ;;
stop)
    as_owner "$bin/pg_ctl" -D "$2/data" -m fast -w stop > /dev/null
    rm -rf "$2"
    ;;
*) echo "usage: $0 start DIR PORT PASSWORD [OWNER_PID] | down DIR | up DIR | stop DIR" >&2; exit 2 ;;
esac
