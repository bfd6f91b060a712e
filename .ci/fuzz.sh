#!/usr/bin/env bash
# Run every fuzz target of the module, one at a time, each for FUZZTIME, starting from its checked-in
# seed corpus (f.Add seeds and testdata/fuzz/<Name>/). Prints one line per target and, for a target
# that failed, its output and where the failing input was written; exits 1 if any failed. A run whose
# only complaint is Go 1.26's coordinator reporting its own -fuzztime deadline passes (see below).
#
#   FUZZTIME          how long each target runs (go test -fuzztime: 10s, 1m, or 5000x); default 10s
#   FUZZMINIMIZETIME  how long a failing input is minimised (go test -fuzzminimizetime); default 10s.
#                     Kept short so that minimising new coverage does not eat a short run.
#   FUZZPACKAGES      packages to look in (default ./...)
#
# The whole run takes about (number of targets) x FUZZTIME, plus building each package once.
set -uo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-10s}
read -r -a PACKAGES <<<"${FUZZPACKAGES:-./...}"
LOGDIR=$(mktemp -d "${TMPDIR:-/tmp}/jobpipe-fuzz.XXXXXX")

# List the targets: `go test -list` prints a package's matching names, then its "ok" line.
listing=$("$GO" test -list '^Fuzz' "${PACKAGES[@]}" 2>&1)
status=$?
if (( status != 0 )); then
  echo "$listing"
  echo "fuzz: listing the fuzz targets failed (exit $status)"
  exit 1
fi
targets=() # "package name"
names=()
while IFS= read -r line; do
  if [[ $line == Fuzz* ]]; then
    names+=("$line")
  elif [[ $line =~ ^ok[[:space:]]+([^[:space:]]+) ]]; then
    for n in "${names[@]}"; do targets+=("${BASH_REMATCH[1]} $n"); done
    names=()
  fi
done <<<"$listing"
if (( ${#targets[@]} == 0 )); then
  echo "fuzz: no fuzz targets found in ${PACKAGES[*]}"
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${FUZZTIME} each (logs in $LOGDIR)"

failed=()
start=$SECONDS
for t in "${targets[@]}"; do
  pkg=${t% *} name=${t#* }
  log="$LOGDIR/${pkg//\//_}.$name.log"
  began=$SECONDS
  "$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" "$pkg" >"$log" 2>&1
  code=$?
  execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  if (( code == 0 )); then
    printf 'PASS  %-22s %-52s %4ds  %s execs\n' "$name" "$pkg" $((SECONDS - began)) "${execs:-?}"
    continue
  fi
  # Go 1.26's fuzz coordinator can report the end of -fuzztime itself as a failure, "context deadline
  # exceeded", when a worker is still busy as the deadline passes (golang/go#75804, fixed in Go 1.27).
  # No input failed then, and none was written: that run passed.
  if ! grep -q 'Failing input written to' "$log" && grep -qx '    context deadline exceeded' "$log" &&
    (( $(grep -c '^    ' "$log") == 1 )); then
    printf 'PASS  %-22s %-52s %4ds  %s execs (the coordinator reported its own deadline: golang/go#75804)\n' \
      "$name" "$pkg" $((SECONDS - began)) "${execs:-?}"
    continue
  fi
  printf 'FAIL  %-22s %-52s %4ds  (exit %d)\n' "$name" "$pkg" $((SECONDS - began)) "$code"
  sed 's/^/      | /' "$log"
  dir=$("$GO" list -f '{{.Dir}}' "$pkg" 2>/dev/null)
  crasher=$(sed -n 's/.*Failing input written to \(testdata\/fuzz\/[^[:space:]]*\).*/\1/p' "$log" | tail -1)
  if [[ -n $crasher ]]; then
    echo "      failing input: $dir/$crasher"
    echo "      re-run it:     $GO test -run '^${name}/${crasher##*/}\$' $pkg"
  fi
  failed+=("$name ($pkg)")
done

echo "fuzz: ${#targets[@]} targets in $((SECONDS - start))s, ${#failed[@]} failed"
if (( ${#failed[@]} > 0 )); then
  printf 'fuzz: failed: %s\n' "${failed[@]}"
  exit 1
fi
