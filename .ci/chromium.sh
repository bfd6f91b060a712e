#!/usr/bin/env bash
# Make sure Chromium is installed: the dashboard's browser test (dashboard/browser_test.go) drives it
# headless, and fails rather than skips without it. Nothing to do when $JOBPIPE_CHROMIUM names an
# executable or chromium is on the PATH; else, as root with apt-get, install Debian's chromium
# package; else say what to do and fail. Prints one line.
set -uo pipefail

say() { echo "chromium: $*"; }
fail() {
  echo "chromium: $*" >&2
  exit 1
}

if [[ -n ${JOBPIPE_CHROMIUM:-} ]]; then
  [[ -x $JOBPIPE_CHROMIUM ]] || fail "JOBPIPE_CHROMIUM=$JOBPIPE_CHROMIUM is not an executable file: point it at a Chromium or Chrome binary, or unset it"
  say "$JOBPIPE_CHROMIUM (from JOBPIPE_CHROMIUM)"
  exit 0
fi
if path=$(command -v chromium || command -v chromium-browser); then
  say "$path"
  exit 0
fi
if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
  fail "not installed, and the dashboard's browser test needs it: run 'sudo apt-get install chromium' (Debian; chromium-browser on Ubuntu), or set JOBPIPE_CHROMIUM=/path/to/chromium"
fi
say "not installed: installing Debian's chromium package with apt-get"
# Another apt-get may hold the lock (an image still being provisioned): wait for it a while.
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get -o DPkg::Lock::Timeout=300 update -qq && apt-get -o DPkg::Lock::Timeout=300 install -y -qq chromium; } >/tmp/jobpipe-apt-chromium.log 2>&1; then
  tail -n 20 /tmp/jobpipe-apt-chromium.log >&2
  fail "apt-get install chromium failed (log: /tmp/jobpipe-apt-chromium.log): install it by hand, or set JOBPIPE_CHROMIUM=/path/to/chromium"
fi
path=$(command -v chromium) || fail "apt-get installed chromium, but it is not on the PATH"
say "installed $path"
