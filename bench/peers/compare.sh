#!/usr/bin/env bash
# Compares jobpipe with River (bench/peers/river) on the drain and steady scenarios of
# docs/benchmarks.md: ROUNDS rounds per scenario, jobpipe and River back to back in each round (the
# first of the pair alternating between rounds, so a drift of the machine's speed does not always
# favour the same one), then each round's ratio (jobpipe's jobs/s over River's) and the median ratio.
#
#   PEER_JOBS      drain's job count                  (default 1000000)
#   PEER_DURATION  steady's measured window           (default 60s)
#   ROUNDS         rounds per scenario                (default 3)
#   DATABASE_URL   PostgreSQL for both                (default postgres://127.0.0.1:5432/postgres?sslmode=disable)
#
# Each run prints its own RESULT line; a run that fails (or loses or doubles a job) stops the script.
set -euo pipefail
cd "$(dirname "$0")/../.."

PEER_JOBS=${PEER_JOBS:-1000000}
PEER_DURATION=${PEER_DURATION:-60s}
ROUNDS=${ROUNDS:-3}
DATABASE_URL=${DATABASE_URL:-postgres://127.0.0.1:5432/postgres?sslmode=disable}
export DATABASE_URL

say() { echo "bench-peers: $*"; }
die() { echo "bench-peers: $*" >&2; exit 1; }

[[ $PEER_JOBS =~ ^[1-9][0-9]*$ ]] || die "PEER_JOBS must be a positive count, not '$PEER_JOBS'"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive count, not '$ROUNDS'"
[[ $PEER_DURATION =~ ^[0-9.]+(ns|us|ms|s|m|h)$ ]] || die "PEER_DURATION must be a Go duration such as 60s or 2m, not '$PEER_DURATION'"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# pg_reachable: a real connection when psql is installed, else the server's answer, else a TCP connect.
pg_reachable() {
  if command -v psql >/dev/null; then
    psql -X -q -d "$DATABASE_URL" -c 'SELECT 1' >/dev/null 2>"$tmp/pg.err"
  elif command -v pg_isready >/dev/null; then
    pg_isready -q -t 3 -d "$DATABASE_URL" 2>"$tmp/pg.err"
  else
    local hostport host port
    hostport=$(sed -E 's|^[a-z]+://([^@/]*@)?([^/?]*).*|\2|' <<<"$DATABASE_URL")
    host=${hostport%:*} port=${hostport##*:}
    [[ $port == "$hostport" || -z $port ]] && port=5432
    timeout 3 bash -c "exec 3<>/dev/tcp/$host/$port" 2>"$tmp/pg.err"
  fi
}
if ! pg_reachable; then
  why=$(head -n 1 "$tmp/pg.err" 2>/dev/null || true)
  die "PostgreSQL is not reachable at $DATABASE_URL${why:+ ($why)}: start it (make services) or point DATABASE_URL at a running server"
fi

say "building jobpipe and the River peer"
go build -o "$tmp/jobpipe" ./cmd/jobpipe
(cd bench/peers/river && go build -o "$tmp/river" .)

# run NAME SCENARIO COMMAND...: run one benchmark, print its RESULT line, and leave its jobs/s in $rate.
run() {
  local name=$1 scenario=$2 out="$tmp/out" log="$tmp/log"
  shift 2
  if ! "$@" >"$out" 2>"$log"; then
    tail -n 5 "$out" "$log" >&2 || true
    die "$name $scenario failed (its output's end above)"
  fi
  grep '^RESULT ' "$out" | tail -n 1
  rate=$(awk '/^RESULT /{ for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "jobs_per_s") v = kv[2] } } END { print v }' "$out")
  [[ $rate =~ ^[0-9.]+$ && $rate != 0 ]] || die "$name $scenario reported no jobs_per_s"
}

jobpipe_run() {
  case $1 in
    drain) run jobpipe drain "$tmp/jobpipe" bench drain --jobs "$PEER_JOBS" --progress 0 ;;
    steady) run jobpipe steady "$tmp/jobpipe" bench steady --duration "$PEER_DURATION" --progress 0 ;;
  esac
  jobpipe_rate=$rate
}

river_run() {
  case $1 in
    drain) run River drain "$tmp/river" drain --jobs "$PEER_JOBS" --progress 0 ;;
    steady) run River steady "$tmp/river" steady --duration "$PEER_DURATION" --progress 0 ;;
  esac
  river_rate=$rate
}

# median: the middle of the numbers on stdin (the mean of the two middle ones for an even count).
median() {
  sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) printf "%.3f", v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

summary=()
for scenario in drain steady; do
  ratios=()
  for (( round = 1; round <= ROUNDS; round++ )); do
    say "$scenario, round $round of $ROUNDS"
    if (( round % 2 )); then
      jobpipe_run "$scenario"
      river_run "$scenario"
    else
      river_run "$scenario"
      jobpipe_run "$scenario"
    fi
    ratio=$(awk -v a="$jobpipe_rate" -v b="$river_rate" 'BEGIN { printf "%.3f", a / b }')
    ratios+=("$ratio")
    say "$scenario, round $round: jobpipe $jobpipe_rate jobs/s, River $river_rate jobs/s, ratio $ratio"
  done
  med=$(printf '%s\n' "${ratios[@]}" | median)
  summary+=("$scenario: median ratio $med (rounds: ${ratios[*]})")
done

say "jobpipe jobs/s over River jobs/s (drain: $PEER_JOBS jobs; steady: $PEER_DURATION window)"
for line in "${summary[@]}"; do
  say "$line"
done
