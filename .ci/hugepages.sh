#!/usr/bin/env bash
# Reserve huge pages for the shared memory of the PostgreSQL clusters the tests start themselves
# (internal/pgproc; PostgreSQL's default huge_pages=try uses them when the kernel has them). Without
# them, on a virtual machine where a page fault is costly, every new backend pays for each page of
# shared memory it touches, and a scenario that ends backends by the hundred (fault scenario 10)
# measures those faults rather than the library: docs/reliability.md, "What a new backend costs".
# Only ever raises the count, only as root; never fails, since the tests run without huge pages too.
#
#   JOBPIPE_HUGEPAGES  how many to reserve (default 1024 pages, 2 GiB of 2 MiB pages: room for about
#                      a dozen clusters of PostgreSQL's default 128 MB of shared buffers)
set -uo pipefail

want=${JOBPIPE_HUGEPAGES:-1024}
if [[ ! $want =~ ^[0-9]+$ ]]; then
  echo "hugepages: JOBPIPE_HUGEPAGES=\"$want\" is not a number of pages; give one such as 1024, or unset it; reserving none"
  exit 0
fi
knob=/proc/sys/vm/nr_hugepages
have=$(cat "$knob" 2>/dev/null) || exit 0 # no huge pages on this kernel: nothing to do
(( have >= want )) && exit 0
if [[ $(id -u) != 0 ]]; then
  echo "hugepages: $have huge pages reserved, fewer than $want; as root, make reserves them (see docs/reliability.md, \"What a new backend costs\")"
  exit 0
fi
{ echo "$want" > "$knob"; } 2>/dev/null # a read-only /proc/sys (a container) is reported below
got=$(cat "$knob")
if (( got >= want )); then
  echo "hugepages: reserved $got huge pages (were $have) for the tests' own PostgreSQL clusters"
else
  echo "hugepages: asked the kernel for $want huge pages and got $got (memory too fragmented or short); clusters that find none use ordinary pages"
fi
