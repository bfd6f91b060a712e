#!/usr/bin/env bash
# Make sure the local servers the tests use answer: PostgreSQL on 127.0.0.1:5432 and Redis on
# 127.0.0.1:6379. For each: nothing to do when it answers; else start it when it is installed;
# else install it (root with apt-get only) and start it; else say what to do and fail.
# Prints one line per service.
#
#   --optional   never install and never fail: for `make test`, whose tests can also use
#                TEST_DATABASE_URL/TEST_REDIS_URL or testcontainers instead of local servers.
set -uo pipefail

OPTIONAL=false
[[ ${1:-} == --optional ]] && OPTIONAL=true

PG_HOST=127.0.0.1 PG_PORT=5432 REDIS_HOST=127.0.0.1 REDIS_PORT=6379
WAIT_SECONDS=15
failed=0

say() { echo "services: $*"; }

# --- probes -----------------------------------------------------------------------------------

pg_answers() {
  if command -v pg_isready >/dev/null; then
    pg_isready -q -h "$PG_HOST" -p "$PG_PORT" -t 2
  else # no client tools: a TCP connect is the best we can do
    timeout 2 bash -c "exec 3<>/dev/tcp/$PG_HOST/$PG_PORT" 2>/dev/null
  fi
}

redis_answers() {
  if command -v redis-cli >/dev/null; then
    [[ $(timeout 2 redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]]
  else
    timeout 2 bash -c "exec 3<>/dev/tcp/$REDIS_HOST/$REDIS_PORT; printf 'PING\r\n' >&3; read -r r <&3; [[ \$r == +PONG* ]]" 2>/dev/null
  fi
}

# wait_for PROBE: poll PROBE until it succeeds or WAIT_SECONDS pass; prints the seconds taken.
wait_for() {
  local start=$SECONDS
  until "$1"; do
    (( SECONDS - start >= WAIT_SECONDS )) && return 1
    sleep 0.3
  done
  echo $(( SECONDS - start ))
}

can_install() { [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; }

apt_install() {
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# --- PostgreSQL -------------------------------------------------------------------------------

pg_installed() { [[ -d /etc/postgresql ]] && [[ -n $(ls /etc/postgresql 2>/dev/null) ]] && command -v pg_ctlcluster >/dev/null; }

pg_start() {
  local version
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>&1 | sed 's/^/services:   /'
  # pg_ctlcluster exits non-zero when the cluster is already starting: judge by the probe
  local took
  if took=$(wait_for pg_answers); then
    say "PostgreSQL $PG_HOST:$PG_PORT was down; started cluster $version/main; answers after ${took} s"
  else
    say "PostgreSQL $PG_HOST:$PG_PORT: started cluster $version/main, but it does not answer after ${WAIT_SECONDS} s (see /var/log/postgresql/)"
    return 1
  fi
}

# A fresh Debian install only lets the postgres user in. The tests connect over TCP as the OS user
# with no password (like this machine kind's servers), so give that user a superuser role and
# trust local TCP connections. Only ever done right after this script installed the server.
pg_configure_fresh_install() {
  local version user hba
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  user=$(id -un)
  hba=/etc/postgresql/$version/main/pg_hba.conf
  sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
  runuser -u postgres -- psql -qX -c "SELECT pg_reload_conf()" >/dev/null
  runuser -u postgres -- createuser --superuser "$user" 2>/dev/null || true
  runuser -u postgres -- createdb --owner "$user" "$user" 2>/dev/null || true
  say "PostgreSQL: fresh install set up for tests: role $user (superuser), trust for 127.0.0.1 and ::1 in $hba"
}

ensure_postgres() {
  if [[ $OPTIONAL == true && -n ${TEST_DATABASE_URL:-} ]]; then
    say "PostgreSQL: TEST_DATABASE_URL is set; local server not checked"; return 0
  fi
  if pg_answers; then
    say "PostgreSQL $PG_HOST:$PG_PORT answers; nothing to do"; return 0
  fi
  if pg_installed; then
    pg_start; return
  fi
  if [[ $OPTIONAL == false ]] && can_install; then
    say "PostgreSQL is not installed; installing postgresql with apt-get"
    apt_install postgresql || { say "PostgreSQL: apt-get install postgresql failed"; return 1; }
    pg_installed || { say "PostgreSQL: installed, but no cluster in /etc/postgresql"; return 1; }
    pg_answers || pg_start || return 1
    pg_configure_fresh_install
    return 0
  fi
  say "PostgreSQL does not answer on $PG_HOST:$PG_PORT and is not installed: install it (as root: apt-get install postgresql, or run \`make services\` as root), or set TEST_DATABASE_URL=postgres://user:password@host:port/db for the tests"
  return 1
}

# --- Redis ------------------------------------------------------------------------------------

redis_start() {
  local dir=/var/lib/redis logdir=/var/log/redis
  if [[ $(id -u) != 0 ]]; then # the system directories are not ours to write
    dir=${XDG_CACHE_HOME:-$HOME/.cache}/jobpipe-redis; logdir=$dir
  fi
  mkdir -p "$dir" "$logdir"
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" --save "" --appendonly no \
    --dir "$dir" --logfile "$logdir/ci.log" 2>&1 | sed 's/^/services:   /'
  local took
  if took=$(wait_for redis_answers); then
    say "Redis $REDIS_HOST:$REDIS_PORT was down; started redis-server; answers after ${took} s"
  else
    say "Redis $REDIS_HOST:$REDIS_PORT: started redis-server, but it does not answer after ${WAIT_SECONDS} s (see $logdir/ci.log)"
    return 1
  fi
}

ensure_redis() {
  if [[ $OPTIONAL == true && -n ${TEST_REDIS_URL:-} ]]; then
    say "Redis: TEST_REDIS_URL is set; local server not checked"; return 0
  fi
  if redis_answers; then
    say "Redis $REDIS_HOST:$REDIS_PORT answers; nothing to do"; return 0
  fi
  if command -v redis-server >/dev/null; then
    redis_start; return
  fi
  if [[ $OPTIONAL == false ]] && can_install; then
    say "Redis is not installed; installing redis-server with apt-get"
    apt_install redis-server || { say "Redis: apt-get install redis-server failed"; return 1; }
    # the package's own service may already have started it
    redis_answers && { say "Redis $REDIS_HOST:$REDIS_PORT answers after install"; return 0; }
    redis_start; return
  fi
  say "Redis does not answer on $REDIS_HOST:$REDIS_PORT and is not installed: install it (as root: apt-get install redis-server, or run \`make services\` as root), or set TEST_REDIS_URL=host:port[,host:port...] for the tests"
  return 1
}

# --- main -------------------------------------------------------------------------------------

if [[ $OPTIONAL == true ]]; then
  case ${JOBPIPE_TEST_SERVERS:-auto} in
    env|containers) say "JOBPIPE_TEST_SERVERS=$JOBPIPE_TEST_SERVERS: local servers not needed"; exit 0 ;;
  esac
fi

ensure_postgres || failed=1
ensure_redis || failed=1

if (( failed )) && [[ $OPTIONAL == true ]]; then
  say "continuing: the tests will look for TEST_DATABASE_URL/TEST_REDIS_URL or a container runtime"
  exit 0
fi
exit $failed
