#!/usr/bin/env bash
# stream_test.sh - `graphrun run` over a dataset several times larger than its --host-memory,
# on the host backend. NumPy writes the inputs and checks every output (tests/npy_tool.py);
# the peak resident set of each run is read from getrusage(RUSAGE_CHILDREN) in a Python
# parent, never from graphrun's own report. It stays within --host-memory plus the
# runtime's budget and a fixed allowance, and does not grow with the dataset; the run keeps
# working under an address-space limit (prlimit --as) that loading everything first could
# not meet. Every promise of the driver holds while it streams: a bad file in the middle
# (refused, every bad file named; --keep-going runs the rest and the manifest records the
# bad ones as failed), Ctrl-C then --resume, a failing tensor (the run stops, or with
# --keep-going does not), --all-or-nothing (interrupted, failed, whole), and SIGKILL leaving
# no partial file under an output's name. The bound holds with io_uring and O_DIRECT, with
# the pread engine (asked for, and as the fallback when io_uring is refused), and through
# the page cache (--no-direct).
#
# Sizes follow GR_TEST_SANITIZER as tests/run_test.sh's do (big_mib): 96 tensors of big_mib
# MiB through a window of 16 * big_mib MiB (the dataset 6 times the window); under a
# sanitizer the tensors are 1 MiB, so the run keeps its margin on the time limit, and the
# bounds that a sanitizer's own memory blurs (the absolute resident set, the address-space
# limit) are not asserted there, only that the resident set does not grow with the dataset.
set -u
bin="${TEST_SRCDIR}/graphrun/tools/graphrun/graphrun"
examples="${TEST_SRCDIR}/graphrun/graph/examples"
tool="${TEST_SRCDIR}/graphrun/tests/npy_tool.py"
py=/usr/bin/python3
T="${TEST_TMPDIR}/stream"
rm -rf "$T" && mkdir -p "$T"
out="$T/stdout" err="$T/stderr"
export GR_BACKEND=host

big_mib=4
[[ -z ${GR_TEST_SANITIZER:-} ]] || big_mib=1
count=96
host=$((16 * big_mib)) # MiB: the dataset is 6 times the window
seed="$examples/seed.graph"
slow="$examples/seed_unfused.graph"

failed=0
case_() {
  local name=$1 rc t0=$EPOCHREALTIME took
  shift
  "$@"
  rc=$?
  took=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f s", b - a }')
  if ((rc == 0)); then echo "PASS $name ($took)"
  elif ((rc == 77)); then echo "SKIP $name: $(cat "$T/skip")"
  else echo "FAIL $name ($took)"; failed=1; fi
}
skip() { echo "$1" >"$T/skip"; return 77; }
has() { grep -qF -- "$2" "$1" || { echo "    missing \"$2\" in:"; sed 's/^/    | /' "$1"; return 1; }; }
np() { "$py" "$tool" "$@"; }
run() { # EXPECTED_RC ARGS...: graphrun ARGS; its peak resident set (bytes) into $T/rss
  local want=$1 rc
  shift
  "$py" - "$out" "$err" "$T/rss" "$bin" "$@" <<'PY'
import resource, subprocess, sys
with open(sys.argv[1], "w") as o, open(sys.argv[2], "w") as e:
    rc = subprocess.call(sys.argv[4:], stdout=o, stderr=e)
open(sys.argv[3], "w").write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024))
sys.exit(rc)
PY
  rc=$?
  if [[ $rc != "$want" ]]; then
    echo "    graphrun $*: exit $rc, expected $want"; sed 's/^/    | /' "$out" "$err" | cut -c1-400
    return 1
  fi
}
json() { "$py" - "$out" "$@"; } # PYTHON on stdin, with d = the JSON summary
rm_out() { rm -rf "$1" "$1.manifest.json"; }

# The inputs, and NumPy's results for them as np.save writes them: graphrun's outputs must
# be these files byte for byte (verify).
"$py" - "$T/in" "$T/ref" "$count" "$big_mib" "$tool" <<'PY' || { echo "FAIL stream_test: setup"; exit 1; }
import numpy as np, os, sys
d, ref, n, mib = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
sys.path.insert(0, os.path.dirname(sys.argv[5]))
import npy_tool
os.makedirs(d)
os.makedirs(ref)
rng = np.random.default_rng(3)
for i in range(n):
    x = rng.random(mib << 18, dtype=np.float32)
    np.save(f"{d}/t{i:02d}.npy", x)
    np.save(f"{ref}/t{i:02d}.npy", npy_tool.seed(x))
PY
verify() { # OUT_DIR [--all]: every file under an output's name is NumPy's result, byte for
  # byte; with --all, every tensor has its output. Prints how many.
  local n=0 f name
  for f in "$1"/*; do
    [[ -e $f ]] || continue
    name=${f##*/}
    cmp -s "$f" "$T/ref/$name" || { echo "    $f differs from NumPy's result"; return 1; }
    n=$((n + 1))
  done
  [[ ${2:-} != --all || $n == "$count" ]] || { echo "    $n outputs in $1, not $count"; return 1; }
  echo "$n"
}
# The engine auto picks here: io_uring, or pread where this kernel refuses io_uring.
"$bin" run --graph "$seed" --input "$T/in/t00.npy" --output "$T/probe.npy" --json >"$out" 2>&1 &&
  engine=$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["io"]["engine"])' "$out") ||
  { echo "FAIL stream_test: probe"; cat "$out"; exit 1; }
[[ $engine == io_uring ]] || echo "    (io_uring is not available here: auto means pread)"

# The bound: the window's own peak (the report) and the process's resident set (getrusage)
# within --host-memory plus the budget plus an allowance for the binary, its threads and the
# manifest; every output right. ENGINE: the --io engine the summary must name.
bounded() { # ENGINE EXTRA...
  local engine=$1
  shift
  rm_out "$T/out" && run 0 run --graph "$seed" --input "$T/in" --output "$T/out" \
    --host-memory "${host}MiB" --json "$@" &&
    json "$engine" "$host" "$(cat "$T/rss")" "${GR_TEST_SANITIZER:-}" <<'PY' &&
import json, sys
d = json.load(open(sys.argv[1]))
engine, host, rss, sanitizer = sys.argv[2], int(sys.argv[3]) << 20, int(sys.argv[4]), sys.argv[5]
io = d["io"]
assert d["status"] == "ok" and d["done"] == 96 and d["host_memory_bytes"] == host, d
assert 0 < d["host_memory_peak_bytes"] <= host, d
assert d["host_memory_segments"] >= 1 and d["host_memory_first_seconds"] > 0, d
assert d["host_memory_more_seconds"] >= 0, d
assert io["engine"] == engine, io
assert io["read_bytes"] >= d["bytes_in"] and io["written_bytes"] >= d["bytes_out"], io
files = io["direct_reads"] + io["buffered_reads"] + io["direct_writes"] + io["buffered_writes"]
assert files == 192, io
if not sanitizer:
    allowance = 48 << 20
    assert rss <= host + d["budget_bytes"] + allowance, (rss, host, d["budget_bytes"])
print(f"    peak resident {rss >> 20} MiB, window {d['host_memory_peak_bytes'] >> 20} MiB of "
      f"{host >> 20}, budget {d['budget_bytes'] >> 20} MiB, {io['engine']}, "
      f"{io['direct_reads']} direct reads")
PY
    verify "$T/out" --all >/dev/null
}
bounded_with_io_uring_and_direct() { # io_uring where the kernel allows it, else pread, said
  bounded "$engine" && json <<'PY'
import json, sys
io = json.load(open(sys.argv[1]))["io"]
# O_DIRECT for every file of 1 MiB and more, unless the file system refused it (said), or
# the page cache has it (read ahead while the runtime started: as many as it had time for).
assert io["direct_reads"] + io["warm_reads"] == 96 or io["buffered_because"], io
assert io["warm_reads"] == io["read_ahead_files"], io
assert (io["engine"] == "io_uring") == (io["fallback"] is None), io
PY
}
# The window's segments after the first are allocated (pinned, on CUDA) by a thread of the
# window's own beside the stream, not by the stream's thread when a read finds no room
# (window.h, gr_window_grow_ahead); GR_TEST_WINDOW_GROWTH=owner keeps the old way for
# comparison. Both fill the bound in segments and give every output right.
window_grows_beside_the_stream() {
  local mode
  for mode in thread owner; do
    if [[ $mode == owner ]]; then
      GR_TEST_WINDOW_GROWTH=owner bounded "$engine" || return 1
    else
      bounded "$engine" || return 1
    fi
    json "$mode" <<'PY' || return 1
import json, sys
d, mode = json.load(open(sys.argv[1])), sys.argv[2]
assert d["host_memory_grown_ahead"] == (mode == "thread"), (mode, d)
assert d["host_memory_segments"] >= 2 and d["host_memory_more_seconds"] > 0, d
grown = d["host_memory_segments_grown"]
assert (grown > 0 if mode == "thread" else grown == 0), (mode, d)
PY
  done
}
# Pinned segments are mapped for transparent huge pages where the kernel gives them on
# request (hostbuf.h, gr_hostbuf_alloc_large: they pin about twice as fast);
# GR_TEST_HUGE_PAGES=0 keeps ordinary pages, and =refuse has their registration refused,
# which falls back to the ordinary way. Every output right each way. (--memory pinned: the
# host backend's default window is pageable; its "pinned" memory is ordinary memory.)
window_on_huge_pages() {
  local mode thp=0
  grep -q '\[always\]\|\[madvise\]' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null &&
    thp=1
  for mode in huge 0 refuse; do
    if [[ $mode == huge ]]; then
      bounded "$engine" --memory pinned || return 1
    else
      GR_TEST_HUGE_PAGES=$mode bounded "$engine" --memory pinned || return 1
    fi
    json "$mode" "$thp" <<'PY' || return 1
import json, sys
d, mode, thp = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3] == "1"
segs, huge = d["host_memory_segments"], d["host_memory_segments_huge"]
assert d["host_memory_kind"] == "pinned", d
assert segs >= 2 and huge == (segs if mode == "huge" and thp else 0), (mode, thp, d)
PY
  done
}
bounded_with_pread() {
  bounded pread --io pread && json <<'PY'
import json, sys
io = json.load(open(sys.argv[1]))["io"]
assert io["fallback"] is None, io  # asked for, not fallen back to
PY
}
bounded_when_io_uring_is_refused() { # as a kernel or a sandbox that refuses it would
  GR_TEST_IO_FAULT=uring bounded pread && has "$err" "note: io_uring is not available" &&
    json <<'PY'
import json, sys
io = json.load(open(sys.argv[1]))["io"]
assert "io_uring_setup: Operation not permitted" in io["fallback"], io
PY
}
bounded_through_the_page_cache() {
  bounded "$engine" --no-direct && json <<'PY'
import json, sys
io = json.load(open(sys.argv[1]))["io"]
assert io["direct_reads"] == io["direct_writes"] == 0 and io["buffered_because"] is None, io
PY
}
bounded_when_the_file_system_refuses_o_direct() {
  GR_TEST_IO_FAULT=direct bounded "$engine" && json <<'PY'
import json, sys
io = json.load(open(sys.argv[1]))["io"]
assert io["direct_reads"] == io["direct_writes"] == 0, io
assert "refused O_DIRECT" in io["buffered_because"], io
PY
}

# A quarter of the dataset, then all of it, through the same window: the resident set must
# not grow with the dataset (loading everything first made it twice the dataset).
# ThreadSanitizer keeps state of its own for every synchronization and memory access (its
# shadow and its histories), which grows with the work done, not with what graphrun holds:
# 32 MiB more for 96 tensors than for 24 in a 2-core CI run. Under tsan the bound allows for
# that; elsewhere the resident set may grow by 16 MiB at most.
rss_does_not_grow_with_the_dataset() {
  local small big grow=16
  [[ ${GR_TEST_SANITIZER:-} != tsan ]] || grow=64
  mkdir -p "$T/quarter" && for ((i = 0; i < count / 4; i++)); do
    ln -f "$T/in/t$(printf %02d $i).npy" "$T/quarter/" || return 1
  done
  rm_out "$T/q_out" && run 0 run --graph "$seed" --input "$T/quarter" --output "$T/q_out" \
    --host-memory "${host}MiB" && small=$(cat "$T/rss") &&
    [[ $(verify "$T/q_out") == $((count / 4)) ]] &&
    rm_out "$T/out" && run 0 run --graph "$seed" --input "$T/in" --output "$T/out" \
      --host-memory "${host}MiB" && big=$(cat "$T/rss") &&
    verify "$T/out" --all >/dev/null || return 1
  echo "    peak resident: $((small >> 20)) MiB for $((count / 4)) tensors, $((big >> 20)) MiB for $count"
  ((big - small <= grow << 20)) || { echo "    grew by $(((big - small) >> 20)) MiB"; return 1; }
}

# prlimit --as: the default window is a quarter of the limit, so the run fits where loading
# the dataset first could not (it needs the dataset twice: 768 MiB here).
runs_under_an_address_space_limit() {
  [[ -z ${GR_TEST_SANITIZER:-} ]] || { skip "a sanitizer's shadow memory needs terabytes of address space"; return; }
  rm_out "$T/as_out"
  # With the pread engine too (its threads' stacks come from the same address space as the
  # window's segments: the grower starts after them, window.h).
  local fault
  for fault in "" uring; do
    rm_out "$T/as_out"
    (ulimit -v $((512 * 1024)) && GR_TEST_IO_FAULT=$fault run 0 run --graph "$seed" \
      --input "$T/in" --output "$T/as_out" --json) && json "$fault" <<'PY' &&
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "ok" and d["done"] == 96 and d["host_memory_bytes"] == 128 << 20, d
assert d["io"]["engine"] == ("pread" if sys.argv[2] == "uring" else d["io"]["engine"]), d
PY
      verify "$T/as_out" --all >/dev/null || return 1
  done
  # A tensor that the limit cannot hold at once: exit 3, saying what it needs and what to do.
  "$py" -c 'import numpy as np, sys; np.save(sys.argv[1], np.ones(8 << 20, np.float32))' \
    "$T/huge.npy" && rm -f "$T/huge_out.npy" &&
    (ulimit -v $((64 * 1024)) && run 3 run --graph "$seed" --input "$T/huge.npy" \
      --output "$T/huge_out.npy" --budget 4MiB --host-memory 1GiB) &&
    has "$err" "out of host memory: the system gave none of the 1.00 GiB of host memory (--host-memory), not even 64.01 MiB at once; the address space is limited to 64.00 MiB (RLIMIT_AS)" &&
    has "$err" "this run needs at least that much" && [[ ! -e $T/huge_out.npy ]] || return 1
  # Under the default bound the same is refused before anything starts (exit 2).
  (ulimit -v $((64 * 1024)) && run 2 run --graph "$seed" --input "$T/huge.npy" \
    --output "$T/huge_out.npy" --budget 4MiB) &&
    has "$err" "needs 64.01 MiB of host memory at once (its inputs and outputs, in whole blocks), more than 16.00 MiB (the default: a quarter of the address-space limit, RLIMIT_AS 64.00 MiB): give --host-memory 64.01 MiB or more" &&
    rm -f "$T/huge.npy"
}

# Two bad files in the middle: refused (exit 2, nothing written), both named in one pass,
# by run and by check; with --keep-going the rest run, the bad ones failed in the manifest.
bad_files_in_the_middle() {
  rm -rf "$T/bad_in" && mkdir -p "$T/bad_in" && ln -f "$T/in"/*.npy "$T/bad_in/" &&
    rm "$T/bad_in/t30.npy" "$T/bad_in/t61.npy" &&
    head -c 100000 "$T/in/t30.npy" >"$T/bad_in/t30.npy" &&
    printf '\x93NUMPY\x01\x00\x10\x00{garbage}      \n' >"$T/bad_in/t61.npy" || return 1
  rm_out "$T/bad_out" && run 2 run --graph "$seed" --input "$T/bad_in" --output "$T/bad_out" \
    --host-memory "${host}MiB" && has "$err" "$T/bad_in/t30.npy: the header says shape" &&
    has "$err" "truncated" && has "$err" "$T/bad_in/t61.npy: malformed .npy header" &&
    has "$err" "2 inputs cannot be read (listed above): nothing run" &&
    [[ -z $(ls -A "$T/bad_out" 2>/dev/null) && ! -e $T/bad_out.manifest.json ]] || return 1
  run 2 check --graph "$seed" --input "$T/bad_in" --json && json "$T/bad_in" <<'PY' || return 1
import json, sys
d = json.load(open(sys.argv[1]))
b = d["bad_inputs"]
assert d["status"] == "refused" and d["exit"] == 2, d
assert [(x["index"], x["input"]) for x in b] == [(30, sys.argv[2] + "/t30.npy"),
                                                 (61, sys.argv[2] + "/t61.npy")], b
assert "truncated" in b[0]["error"] and "malformed" in b[1]["error"], b
PY
  run 1 run --graph "$seed" --input "$T/bad_in" --output "$T/bad_out" \
    --host-memory "${host}MiB" --keep-going --json && json <<'PY' &&
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "failed" and d["done"] == 94 and d["failed"] == 2, d
assert d["errors"] == {"bad input": 2} and d["not_run"] == 0, d
assert [f["index"] for f in d["failures"]] == [30, 61], d["failures"]
assert d["first_error"]["status"] == "bad input", d["first_error"]
PY
    "$py" - "$T/bad_out.manifest.json" <<'PY' &&
import json, sys
m = json.load(open(sys.argv[1]))
bad = [f for f in m["files"] if f["status"] != "done"]
assert [(f["name"], f["status"], f["error"]["status"]) for f in bad] == \
    [("t30.npy", "failed", "bad input"), ("t61.npy", "failed", "bad input")], bad
assert "truncated" in bad[0]["error"]["message"], bad[0]
PY
    [[ $(verify "$T/bad_out") == 94 ]] || return 1
  # Mended, --resume runs only those two.
  ln -f "$T/in/t30.npy" "$T/in/t61.npy" "$T/bad_in/" &&
    run 0 run --graph "$seed" --input "$T/bad_in" --output "$T/bad_out" \
      --host-memory "${host}MiB" --resume --json && json <<'PY' &&
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "ok" and d["resumed"] == 94 and d["outputs_written"] == 2, d
PY
    verify "$T/bad_out" --all >/dev/null
}

# The shared run of the promises: the slow graph, one worker, so that a run lasts long
# enough to interrupt, in the background ($pid).
slow_run() { # OUT_DIR EXTRA...
  local o=$1
  shift
  "$bin" run --graph "$slow" --input "$T/in" --output "$o" --workers 1 --progress never \
    --host-memory "${host}MiB" "$@" >"$out" 2>"$err" &
  pid=$!
}
wait_for_a_done_tensor() { # MANIFEST: until it records one (at most 20 s)
  local i
  for ((i = 0; i < 400; i++)); do
    grep -q '"status": "done"' "$1" 2>/dev/null && return
    sleep 0.05
  done
}
counts() { np check-manifest "$@"; }

interrupted_then_resumed() {
  local pid rc c done
  rm_out "$T/int_out" && slow_run "$T/int_out" && wait_for_a_done_tensor "$T/int_out.manifest.json"
  kill -INT "$pid"
  wait "$pid"
  rc=$?
  [[ $rc == 130 ]] || { echo "    exit $rc, expected 130"; sed 's/^/    | /' "$err"; return 1; }
  c=$(counts "$T/int_out.manifest.json") || return 1
  [[ $c =~ ^done=([0-9]+)\ failed=0\ not_run=([0-9]+)\ earlier=0$ ]] || { echo "    $c"; return 1; }
  done=${BASH_REMATCH[1]}
  ((done > 0 && done < count)) || { echo "    $c: want some done, not all"; return 1; }
  has "$err" "graphrun run: interrupted: $done of $count done, written; $((count - done)) not run; rerun with --resume" &&
    run 0 run --graph "$slow" --input "$T/in" --output "$T/int_out" --host-memory "${host}MiB" \
      --resume && has "$out" "ok: $count of $count tensors done ($done by an earlier run)" &&
    verify "$T/int_out" --all >/dev/null
}
failure_stops_the_run_or_not() { # GR_FAULT=arena:3: the third tensor to start, t02
  local c
  rm_out "$T/fail_out" && GR_FAULT=arena:3 run 1 run --graph "$slow" --input "$T/in" \
    --output "$T/fail_out" --workers 1 --host-memory "${host}MiB" || return 1
  c=$(counts "$T/fail_out.manifest.json") || return 1
  [[ $c =~ ^done=([0-9]+)\ failed=1\ not_run=([0-9]+)\ earlier=0$ ]] &&
    ((BASH_REMATCH[2] > 0)) || { echo "    $c"; return 1; }
  has "$err" "tensor 2 ($T/in/t02.npy) failed: out of host memory: cannot place" &&
    rm_out "$T/fail_out" && GR_FAULT=arena:3 run 1 run --graph "$slow" --input "$T/in" \
      --output "$T/fail_out" --workers 1 --host-memory "${host}MiB" --keep-going &&
    [[ $(counts "$T/fail_out.manifest.json") == "done=95 failed=1 not_run=0 earlier=0" ]]
}
all_or_nothing_while_streaming() {
  local pid rc
  local i
  # Interrupted once a tensor's output is in its temporary file (no manifest before the end
  # to wait for): that file must go too.
  rm_out "$T/aon_out" && slow_run "$T/aon_out" --all-or-nothing
  for ((i = 0; i < 400; i++)); do
    ls -A "$T/aon_out" 2>/dev/null | grep -q 'graphrun-tmp' && break
    sleep 0.05
  done
  kill -INT "$pid"
  wait "$pid"
  rc=$?
  [[ $rc == 130 ]] || { echo "    exit $rc, expected 130"; sed 's/^/    | /' "$err"; return 1; }
  has "$err" "no output written" &&
    [[ -z $(ls -A "$T/aon_out" 2>/dev/null) && ! -e $T/aon_out.manifest.json ]] || return 1
  GR_FAULT=arena:3 run 1 run --graph "$slow" --input "$T/in" --output "$T/aon_out" \
    --workers 1 --host-memory "${host}MiB" --all-or-nothing &&
    has "$err" "failed: no output written" &&
    [[ -z $(ls -A "$T/aon_out" 2>/dev/null) && ! -e $T/aon_out.manifest.json ]] &&
    run 0 run --graph "$seed" --input "$T/in" --output "$T/aon_out" \
      --host-memory "${host}MiB" --all-or-nothing &&
    [[ $(counts "$T/aon_out.manifest.json") == "done=$count failed=0 not_run=0 earlier=0" ]]
}
sigkill_leaves_no_partial_output() {
  local pid
  rm_out "$T/kill_out" && slow_run "$T/kill_out" --sync none &&
    wait_for_a_done_tensor "$T/kill_out.manifest.json"
  kill -KILL "$pid"
  wait "$pid"
  # Whatever the moment: every file under an output's name is whole and right.
  verify "$T/kill_out" >/dev/null && counts "$T/kill_out.manifest.json" --killed >/dev/null &&
    run 0 run --graph "$slow" --input "$T/in" --output "$T/kill_out" --host-memory "${host}MiB" \
      --resume && [[ -z $(ls -A "$T/kill_out" | grep '^\.') ]] && verify "$T/kill_out" --all >/dev/null
}
sync_end_and_none() { # outputs and manifests as with each; the manifest says done at the end
  local s
  for s in end none; do
    rm_out "$T/sync_out" && run 0 run --graph "$seed" --input "$T/in" --output "$T/sync_out" \
      --host-memory "${host}MiB" --sync "$s" --json && json "$s" <<'PY' &&
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "ok" and d["done"] == 96 and d["io"]["sync"] == sys.argv[2], d
PY
      [[ $(counts "$T/sync_out.manifest.json") == "done=$count failed=0 not_run=0 earlier=0" ]] &&
      verify "$T/sync_out" --all >/dev/null || return 1
  done
}

# The first inputs are read into the page cache while the runtime starts (readahead.h): up
# to --host-memory of whole files, in order (GR_TEST_READ_AHEAD=whole: all it may, before
# the stream starts, as a GPU's slow start would allow); the stream reads those from the
# cache and drops them from it, so that after the run none of them is cached (the kernel's
# mincore, where this file system drops what it is told to), as with O_DIRECT alone; a file
# read in part when the stream starts (GR_TEST_READ_AHEAD=part:N) is dropped then.
# --no-read-ahead reads none ahead.
resident() { # FILES...: how many of their pages the page cache holds; -1 where nothing drops
  "$py" - "$@" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
page = os.sysconf("SC_PAGE_SIZE")
def pages(path, drop):
    fd = os.open(path, os.O_RDONLY)
    if drop:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    n = os.fstat(fd).st_size
    p = libc.mmap(None, n, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
    v = ctypes.create_string_buffer((n + page - 1) // page)
    assert libc.mincore(p, n, v) == 0, ctypes.get_errno()
    libc.munmap(p, n)
    os.close(fd)
    return sum(b & 1 for b in v.raw)
drop = sys.argv[1] == "--drop"
files = sys.argv[2:] if drop else sys.argv[1:]
print(sum(pages(f, drop) for f in files))
PY
}
read_ahead_while_the_runtime_starts() {
  local left checks=1 i
  left=$(resident --drop "$T"/in/*.npy) || return 1
  ((left == 0)) || { checks=0; echo "    (this file system keeps dropped pages: not checked)"; }
  rm_out "$T/ra_out" && GR_TEST_READ_AHEAD=whole run 0 run --graph "$seed" --input "$T/in" \
    --output "$T/ra_out" --host-memory "${host}MiB" --json &&
    json "$host" "$big_mib" <<'PY' &&
import json, sys
d = json.load(open(sys.argv[1]))
host, file = int(sys.argv[2]) << 20, (int(sys.argv[3]) << 20) + 128  # a .npy's header: 128
io = d["io"]
assert d["status"] == "ok" and d["done"] == 96, d
# Whole files, in order, up to the bound; each read by the stream from the cache.
assert io["read_ahead_files"] == host // file, io
assert io["read_ahead_bytes"] == io["read_ahead_files"] * file <= host, io
assert io["warm_reads"] == io["read_ahead_files"], io
assert io["direct_reads"] == 96 - io["warm_reads"] or io["buffered_because"], io
assert io["read_ahead_seconds"] > 0, io
PY
    verify "$T/ra_out" --all >/dev/null || return 1
  if ((checks)); then # the files read ahead: t00.npy onwards
    local n files=()
    n=$(json <<<'import json, sys; print(json.load(open(sys.argv[1]))["io"]["read_ahead_files"])')
    for ((i = 0; i < n; i++)); do files+=("$(printf '%s/in/t%02d.npy' "$T" "$i")"); done
    left=$(resident "${files[@]}") && ((left == 0)) ||
      { echo "    $left pages of the $n inputs read ahead left in the page cache"; return 1; }
  fi
  # Stopped in the middle of t01 (as a runtime that started then stops it): t00 is read
  # warm, and what was cached of t01 is dropped when the stream starts.
  left=$(resident --drop "$T"/in/*.npy) || return 1
  rm_out "$T/ra_out" && GR_TEST_READ_AHEAD=part:$(((big_mib << 20) * 3 / 2)) run 0 run \
    --graph "$seed" --input "$T/in" --output "$T/ra_out" --host-memory "${host}MiB" --json &&
    json <<'PY' &&
import json, sys
io = json.load(open(sys.argv[1]))["io"]
assert io["read_ahead_files"] == io["warm_reads"] == 1, io
PY
    verify "$T/ra_out" --all >/dev/null || return 1
  if ((checks)); then
    left=$(resident "$T/in/t00.npy" "$T/in/t01.npy") && ((left == 0)) ||
      { echo "    $left pages of t00 (warm) and t01 (read in part) left in the page cache"; return 1; }
  fi
  rm_out "$T/ra_out" && GR_TEST_READ_AHEAD=whole run 0 run --graph "$seed" --input "$T/in" \
    --output "$T/ra_out" --host-memory "${host}MiB" --no-read-ahead --json && json <<'PY' &&
import json, sys
io = json.load(open(sys.argv[1]))["io"]
assert io["read_ahead_files"] == io["read_ahead_bytes"] == io["warm_reads"] == 0, io
assert io["read_ahead_seconds"] == 0, io
PY
    verify "$T/ra_out" --all >/dev/null
}
# Planning reads each input's header, not a quarter MiB of its data through the kernel's
# read-ahead (which the run would then read again with O_DIRECT): after `graphrun check`,
# at most the 64 KiB header probe of each file is in the page cache.
planning_reads_only_the_headers() {
  local left most
  left=$(resident --drop "$T"/in/*.npy) || return 1
  ((left == 0)) || { skip "this file system keeps dropped pages"; return; }
  "$bin" check --graph "$seed" --input "$T/in" --output "$T/plan_out" >"$out" 2>"$err" ||
    { echo "    check failed"; sed 's/^/    | /' "$out" "$err"; return 1; }
  left=$(resident "$T"/in/*.npy) || return 1
  most=$((count * 65536 / $(getconf PAGESIZE)))
  ((left <= most)) || { echo "    $left pages of the inputs cached by planning, over $most"; return 1; }
}

case_ bounded_with_io_uring_and_direct bounded_with_io_uring_and_direct
case_ planning_reads_only_the_headers planning_reads_only_the_headers
case_ read_ahead_while_the_runtime_starts read_ahead_while_the_runtime_starts
case_ window_grows_beside_the_stream window_grows_beside_the_stream
case_ window_on_huge_pages window_on_huge_pages
case_ bounded_with_pread bounded_with_pread
case_ bounded_when_io_uring_is_refused bounded_when_io_uring_is_refused
case_ bounded_through_the_page_cache bounded_through_the_page_cache
case_ bounded_when_the_file_system_refuses_o_direct bounded_when_the_file_system_refuses_o_direct
case_ rss_does_not_grow_with_the_dataset rss_does_not_grow_with_the_dataset
case_ runs_under_an_address_space_limit runs_under_an_address_space_limit
case_ bad_files_in_the_middle bad_files_in_the_middle
case_ interrupted_then_resumed interrupted_then_resumed
case_ failure_stops_the_run_or_not failure_stops_the_run_or_not
case_ all_or_nothing_while_streaming all_or_nothing_while_streaming
case_ sigkill_leaves_no_partial_output sigkill_leaves_no_partial_output
case_ sync_end_and_none sync_end_and_none
exit $failed
