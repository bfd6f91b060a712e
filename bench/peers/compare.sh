#!/usr/bin/env bash
# Compares jobpipe with River (bench/peers/river) on the drain, steady and rate scenarios of
# docs/benchmarks.md: ROUNDS rounds per scenario, jobpipe and River back to back in each round (the
# first of the pair alternating between rounds, so a drift of the machine's speed does not always
# favour the same one), then each round's ratios (jobpipe's over River's) and their medians: jobs/s
# for drain and steady; for rate, the CPU time per job (the machine's, the bench process's and
# PostgreSQL's backends') and, side by side, both enqueue-to-start p99s and transactions per job.
#
#   PEER_SCENARIOS      the scenarios, in order          (default "drain steady rate")
#   PEER_JOBS           drain's job count                (default 1000000)
#   PEER_DURATION       steady's measured window         (default 60s)
#   PEER_RATE           rate's jobs per second           (default 600)
#   PEER_RATE_DURATION  how long rate offers them        (default 5m)
#   ROUNDS              rounds per scenario              (default 3)
#   PEER_JOBPIPE_FLAGS  flags for jobpipe's drain and steady (default "--workers 2000": River's
#                       2,000 workers, so both run as many jobs at once; "" for jobpipe's own 100)
#   DATABASE_URL        PostgreSQL for both              (default postgres://127.0.0.1:5432/postgres?sslmode=disable)
#
# Each run prints its own RESULT line; a run that fails (or loses or doubles a job) stops the script.
set -euo pipefail
cd "$(dirname "$0")/../.."

PEER_SCENARIOS=${PEER_SCENARIOS:-drain steady rate}
PEER_JOBS=${PEER_JOBS:-1000000}
PEER_DURATION=${PEER_DURATION:-60s}
PEER_RATE=${PEER_RATE:-600}
PEER_RATE_DURATION=${PEER_RATE_DURATION:-5m}
ROUNDS=${ROUNDS:-3}
PEER_JOBPIPE_FLAGS=${PEER_JOBPIPE_FLAGS---workers 2000}
read -r -a jobpipe_flags <<<"$PEER_JOBPIPE_FLAGS"
DATABASE_URL=${DATABASE_URL:-postgres://127.0.0.1:5432/postgres?sslmode=disable}
export DATABASE_URL

say() { echo "bench-peers: $*"; }
die() { echo "bench-peers: $*" >&2; exit 1; }

[[ $PEER_JOBS =~ ^[1-9][0-9]*$ ]] || die "PEER_JOBS must be a positive count, not '$PEER_JOBS'"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive count, not '$ROUNDS'"
[[ $PEER_DURATION =~ ^[0-9.]+(ns|us|ms|s|m|h)$ ]] || die "PEER_DURATION must be a Go duration such as 60s or 2m, not '$PEER_DURATION'"
[[ $PEER_RATE =~ ^[1-9][0-9]*$ ]] || die "PEER_RATE must be a positive count of jobs per second, not '$PEER_RATE'"
[[ $PEER_RATE_DURATION =~ ^[0-9.]+(ns|us|ms|s|m|h)$ ]] || die "PEER_RATE_DURATION must be a Go duration such as 5m or 30s, not '$PEER_RATE_DURATION'"
read -r -a scenarios <<<"$PEER_SCENARIOS"
(( ${#scenarios[@]} > 0 )) || die "PEER_SCENARIOS names no scenario: give some of drain, steady and rate"
for scenario in "${scenarios[@]}"; do
  [[ $scenario =~ ^(drain|steady|rate)$ ]] || die "PEER_SCENARIOS: unknown scenario '$scenario': want drain, steady or rate"
done

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

# run NAME SCENARIO COMMAND...: run one benchmark, print its RESULT line, and leave its pairs in res.
declare -A res
run() {
  local name=$1 scenario=$2 out="$tmp/out" log="$tmp/log" line kv
  shift 2
  if ! "$@" >"$out" 2>"$log"; then
    tail -n 5 "$out" "$log" >&2 || true
    die "$name $scenario failed (its output's end above)"
  fi
  line=$(grep '^RESULT ' "$out" | tail -n 1) || die "$name $scenario printed no RESULT line"
  echo "$line"
  res=()
  for kv in ${line#RESULT }; do
    res[${kv%%=*}]=${kv#*=}
  done
}

# take WHO NAME SCENARIO KEY...: copy each KEY of res into the variable WHO_KEY; each must be a
# positive number.
take() {
  local who=$1 name=$2 scenario=$3 key
  shift 3
  for key; do
    [[ ${res[$key]:-} =~ ^[0-9.]+$ && ${res[$key]} =~ [1-9] ]] || die "$name $scenario reported no positive $key"
    printf -v "${who}_${key}" '%s' "${res[$key]}"
  done
}

# The RESULT keys each scenario's comparison reads.
keys_for() {
  case $1 in
    rate) echo machine_cpu_us_per_job worker_cpu_us_per_job pg_cpu_us_per_job start_p99_ms xacts_per_job ;;
    *) echo jobs_per_s ;;
  esac
}

jobpipe_run() {
  case $1 in
    drain) run jobpipe drain "$tmp/jobpipe" bench drain --jobs "$PEER_JOBS" --progress 0 "${jobpipe_flags[@]}" ;;
    steady) run jobpipe steady "$tmp/jobpipe" bench steady --duration "$PEER_DURATION" --progress 0 "${jobpipe_flags[@]}" ;;
    rate) run jobpipe rate "$tmp/jobpipe" bench rate --rate "$PEER_RATE" --duration "$PEER_RATE_DURATION" --progress 0 ;;
  esac
  # shellcheck disable=SC2046
  take jobpipe jobpipe "$1" $(keys_for "$1")
}

river_run() {
  case $1 in
    drain) run River drain "$tmp/river" drain --jobs "$PEER_JOBS" --progress 0 ;;
    steady) run River steady "$tmp/river" steady --duration "$PEER_DURATION" --progress 0 ;;
    rate) run River rate "$tmp/river" rate --rate "$PEER_RATE" --duration "$PEER_RATE_DURATION" --progress 0 ;;
  esac
  # shellcheck disable=SC2046
  take river River "$1" $(keys_for "$1")
}

# median: the middle of the numbers on stdin (the mean of the two middle ones for an even count).
median() {
  sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) printf "%.3f", v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# med NUMBER...: their median.
med() { printf '%s\n' "$@" | median; }

# ratio A B: A over B, three decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

summary=()
for scenario in "${scenarios[@]}"; do
  ratios=() machine=() worker=() pg=() jp99=() rp99=() jx=() rx=()
  for (( round = 1; round <= ROUNDS; round++ )); do
    say "$scenario, round $round of $ROUNDS"
    if (( round % 2 )); then
      jobpipe_run "$scenario"
      river_run "$scenario"
    else
      river_run "$scenario"
      jobpipe_run "$scenario"
    fi
    if [[ $scenario == rate ]]; then
      machine+=("$(ratio "$jobpipe_machine_cpu_us_per_job" "$river_machine_cpu_us_per_job")")
      worker+=("$(ratio "$jobpipe_worker_cpu_us_per_job" "$river_worker_cpu_us_per_job")")
      pg+=("$(ratio "$jobpipe_pg_cpu_us_per_job" "$river_pg_cpu_us_per_job")")
      jp99+=("$jobpipe_start_p99_ms") rp99+=("$river_start_p99_ms")
      jx+=("$jobpipe_xacts_per_job") rx+=("$river_xacts_per_job")
      say "rate, round $round: CPU µs/job jobpipe / River: machine $jobpipe_machine_cpu_us_per_job / $river_machine_cpu_us_per_job" \
        "(ratio ${machine[-1]}), worker $jobpipe_worker_cpu_us_per_job / $river_worker_cpu_us_per_job (ratio ${worker[-1]})," \
        "PostgreSQL $jobpipe_pg_cpu_us_per_job / $river_pg_cpu_us_per_job (ratio ${pg[-1]});" \
        "start p99 $jobpipe_start_p99_ms / $river_start_p99_ms ms; transactions/job $jobpipe_xacts_per_job / $river_xacts_per_job"
    else
      ratios+=("$(ratio "$jobpipe_jobs_per_s" "$river_jobs_per_s")")
      say "$scenario, round $round: jobpipe $jobpipe_jobs_per_s jobs/s, River $river_jobs_per_s jobs/s, ratio ${ratios[-1]}"
    fi
  done
  if [[ $scenario == rate ]]; then
    summary+=("rate ($PEER_RATE jobs/s for $PEER_RATE_DURATION): CPU per job, jobpipe over River, median ratio:" \
      "  machine $(med "${machine[@]}") (rounds: ${machine[*]})" \
      "  worker (the bench process) $(med "${worker[@]}") (rounds: ${worker[*]})" \
      "  PostgreSQL's backends $(med "${pg[@]}") (rounds: ${pg[*]})" \
      "rate, enqueue->start p99, median: jobpipe $(med "${jp99[@]}") ms (rounds: ${jp99[*]}), River $(med "${rp99[@]}") ms (rounds: ${rp99[*]})" \
      "rate, transactions per job, median: jobpipe $(med "${jx[@]}") (rounds: ${jx[*]}), River $(med "${rx[@]}") (rounds: ${rx[*]})")
  else
    size="$PEER_JOBS jobs"
    [[ $scenario == steady ]] && size="a $PEER_DURATION window"
    summary+=("$scenario ($size): jobs/s, jobpipe over River, median ratio $(med "${ratios[@]}") (rounds: ${ratios[*]})")
  fi
done

say "medians of $ROUNDS rounds${PEER_JOBPIPE_FLAGS:+ (jobpipe with $PEER_JOBPIPE_FLAGS)}"
for line in "${summary[@]}"; do
  say "$line"
done
