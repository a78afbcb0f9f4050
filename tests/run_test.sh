#!/usr/bin/env bash
# run_test.sh - `graphrun run` end to end on the host backend: NumPy writes the inputs and
# checks the outputs (tests/npy_tool.py), so nothing here trusts graphrun's own .npy code.
# Covers .npy and raw files, directories, a two-input graph, the JSON summary, environment
# defaults, device lists on emulated devices, a manifest, every refusal (with its message, and
# no output file left behind; with --json one JSON object, and nothing created). Outputs per
# tensor: Ctrl-C keeps what is done and --resume goes on; a failing tensor (GR_FAULT) stops
# the run or, with --keep-going, does not; --all-or-nothing writes nothing unless all is
# done; SIGKILL mid-run leaves no partial output and the next run removes what it left.
# Inputs: what a directory holds (only .npy files unless raw; the rest skipped and named),
# directories of other names, lists (and resuming them), stdin and stdout, flags that do not
# apply, `graphrun check`, and a spec's constants (--const: streamed, resumed, every mistake
# refused). Element types: graphs of every type (tests/graphs/) on .npy inputs of either
# byte order, outputs compared byte for byte with what np.save writes for
# NumPy's result; bfloat16 through ml_dtypes, SKIP where it cannot be imported.
set -u
bin="${TEST_SRCDIR}/graphrun/tools/graphrun/graphrun"
examples="${TEST_SRCDIR}/graphrun/graph/examples"
graphs="${TEST_SRCDIR}/graphrun/tests/graphs"
tool="${TEST_SRCDIR}/graphrun/tests/npy_tool.py"
py=/usr/bin/python3
T="${TEST_TMPDIR}/run"
rm -rf "$T" && mkdir -p "$T"
out="$T/stdout" err="$T/stderr"
export GR_BACKEND=host

run() { # EXPECTED_RC ARGS...
  local want=$1 rc
  shift
  "$bin" "$@" >"$out" 2>"$err"
  rc=$?
  if [[ $rc != "$want" ]]; then
    echo "    graphrun $*: exit $rc, expected $want"; sed 's/^/    | /' "$out" "$err"
    return 1
  fi
}
run_as() { # AS_BYTES EXPECTED_RC ARGS...: run under an address-space limit (prlimit --as)
  local as=$1 want=$2 rc
  shift 2
  prlimit --as="$as" -- "$bin" "$@" >"$out" 2>"$err"
  rc=$?
  if [[ $rc != "$want" ]]; then
    echo "    prlimit --as=$as graphrun $*: exit $rc, expected $want"; sed 's/^/    | /' "$out" "$err"
    return 1
  fi
}
has() { grep -qF -- "$2" "$1" || { echo "    missing \"$2\" in:"; sed 's/^/    | /' "$1"; return 1; }; }
absent() { # nothing at PATH, nor a temporary file of ours beside it
  local d; d=$(dirname "$1")
  [[ ! -e $1 ]] || { echo "    $1 exists"; return 1; }
  ! ls -a "$d" 2>/dev/null | grep -q 'graphrun-' || { echo "    temporary files left in $d"; ls -a "$d"; return 1; }
}
np() { "$py" "$tool" "$@"; }

failed=0
# A case returning 77 was skipped: npy_tool.py exits so without ml_dtypes (bfloat16), and
# skip() with its reason. Each line ends with the case's time, so that a log shows where the
# test's time goes.
case_() {
  local name=$1 rc t0=$EPOCHREALTIME took
  shift
  rm -f "$T/skip"
  "$@"
  rc=$?
  took=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f s", b - a }')
  if ((rc == 0)); then echo "PASS $name ($took)"
  elif ((rc == 77)) && [[ -e $T/skip ]]; then echo "SKIP $name: $(cat "$T/skip")"
  elif ((rc == 77)); then echo "SKIP $name: ml_dtypes (NumPy's bfloat16) cannot be imported"
  else echo "FAIL $name ($took)"; failed=1; fi
}
skip() { echo "$1" >"$T/skip"; return 77; }
bf16() { np has-ml-dtypes || return 77; }
# ASan and TSan reserve terabytes of address space for their shadow memory: no run starts
# under an address-space limit there.
no_as_limit_under_sanitizers() {
  [[ -z ${GR_TEST_SANITIZER:-} ]] || skip "an address-space limit (prlimit --as) under $GR_TEST_SANITIZER: the sanitizer's shadow memory needs terabytes of address space"
}

npy_round_trip() {
  np make "$T/a.npy" 3,5,7 1 && run 0 run --graph "$examples/seed.graph" --input "$T/a.npy" \
    --output "$T/a_out.npy" && np check-seed "$T/a_out.npy" "$T/a.npy" &&
    has "$out" "ok: 1 of 1 tensors done"
}
npy_shapes() { # 0-d, 1-element, odd, 4-d
  local s
  for s in "" 1 1021 2,3,4,5; do
    np make "$T/s.npy" "$s" 2 && run 0 run --graph "$examples/seed.graph" --input "$T/s.npy" \
      --output "$T/s_out.npy" --force && np check-seed "$T/s_out.npy" "$T/s.npy" || return 1
  done
}
raw_files() {
  np make "$T/r.bin" 4,6 3 --raw && run 0 run --graph "$examples/seed.graph" --input "$T/r.bin" \
    --output "$T/r_out.bin" --dtype float32 --shape 4,6 && np check-raw-seed "$T/r_out.bin" \
    "$T/r.bin" 4,6 && run 0 run --graph "$examples/seed.graph" --input "$T/r.bin" \
    --output "$T/r_out1d.bin" && np check-raw-seed "$T/r_out1d.bin" "$T/r.bin" 24
}
directories() {
  mkdir -p "$T/in_dir"
  local i
  for i in 1 2 3 4 5; do np make "$T/in_dir/t$i.npy" "$((i * 97))" "$((10 + i))" || return 1; done
  run 0 run --graph "$examples/seed.graph" --input "$T/in_dir" --output "$T/out_dir" \
    --workers 2 && has "$out" "5 of 5 tensors done" || return 1
  for i in 1 2 3 4 5; do np check-seed "$T/out_dir/t$i.npy" "$T/in_dir/t$i.npy" || return 1; done
  [[ $(ls "$T/out_dir" | wc -l) == 5 ]]
}
two_inputs_two_outputs() {
  np make "$T/da.npy" 100,3 4 && np make "$T/db.npy" 100,3 5 &&
    run 0 run --graph "$examples/dag.graph" --input "$T/da.npy" --input "$T/db.npy" \
      --output "$T/d0.npy" --output "$T/d1.npy" &&
    np check-dag "$T/d0.npy" "$T/d1.npy" "$T/da.npy" "$T/db.npy"
}
unfused_graph_equals_fused() {
  np make "$T/u.npy" 999 6 && run 0 run --graph "$examples/seed_unfused.graph" \
    --input "$T/u.npy" --output "$T/u_out.npy" && np check-seed "$T/u_out.npy" "$T/u.npy"
}
json_summary() {
  run 0 run --graph "$examples/seed.graph" --input "$T/in_dir" --output "$T/json_dir" --json &&
    "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "ok" and d["tensors"] == 5 and d["done"] == 5, d
assert d["outputs_written"] == 5 and d["errors"] == {} and d["backend"] == "host", d
assert d["bytes_in"] == d["bytes_out"] > 0 and d["seconds"] > 0, d
assert 0 < d["budget_peak_bytes"] <= d["budget_bytes"], d
' "$out"
}
environment_defaults() {
  GR_WORKERS=2 GR_BUDGET=1MiB run 0 run --graph "$examples/seed.graph" --input "$T/a.npy" \
    --output "$T/env.npy" --json && "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["workers_per_device"] == 2 and d["budget_bytes"] == 1 << 20, d' "$out" &&
    GR_BUDGET=lots run 2 run --graph "$examples/seed.graph" --input "$T/a.npy" \
      --output "$T/env2.npy" && has "$err" "GR_BUDGET=lots: invalid value" && absent "$T/env2.npy"
}
sizes_and_usage_mistakes() { # one rule for sizes; exit 2 in the flag's terms; -h; no wall of text
  local cmd
  # (The host backend rounds a budget down to 256 bytes: these are multiples.)
  run 0 run --graph "$examples/seed.graph" --input "$T/a.npy" --output "$T/sz1.npy" \
    --budget 1.5KiB --json && "$py" -c '
import json, sys
assert json.load(open(sys.argv[1]))["budget_bytes"] == 1536' "$out" &&
    run 0 run --graph "$examples/seed.graph" --input "$T/a.npy" --output "$T/sz0.npy" \
      --budget 512000B --json && "$py" -c '
import json, sys
assert json.load(open(sys.argv[1]))["budget_bytes"] == 512000' "$out" &&
    run 0 run --graph "$examples/seed.graph" --input "$T/a.npy" --output "$T/sz2.npy" \
      --budget 4Ki --json && "$py" -c '
import json, sys
assert json.load(open(sys.argv[1]))["budget_bytes"] == 4096' "$out" || return 1
  for b in 1 0.3K 1e3 0x100 512b3; do
    run 2 run --graph "$examples/seed.graph" --input "$T/a.npy" --output "$T/sz3.npy" \
      --budget "$b" && has "$err" "invalid value '$b' for --budget (sizes: 512, 512B" &&
      ! grep -q budget_bytes "$err" && absent "$T/sz3.npy" || return 1
  done
  run 2 run --graph "$examples/seed.graph" --input "$T/a.npy" --output "$T/sz4.npy" \
    --devices 5 && has "$err" "invalid value for --devices: device 5 is not there (the host" &&
    absent "$T/sz4.npy" && run 2 demo --devices 3 --count 1 --elems 16 &&
    has "$err" "device 3 is not there" || return 1
  for cmd in run check bench demo info stress; do
    run 0 "$cmd" -h && has "$out" "usage: graphrun $cmd" &&
      run 2 "$cmd" --no-such-flag && has "$err" "see 'graphrun $cmd --help' for the options" &&
      (($(wc -l <"$err") <= 2)) || { echo "    $cmd: $(wc -l <"$err") lines"; return 1; }
  done
}
bench_flags_refused_before_any_device() { # exit 2 in the flag's terms, with or without a GPU
  run 2 bench --layout scattered && has "$err" "invalid value 'scattered' for --layout" &&
    run 2 bench --layout pooled --layout separate && has "$err" "--layout given twice" &&
    run 2 bench --pipeline 1000 &&
    has "$err" "invalid value '1000' for --pipeline (0, or 1MiB or more)" &&
    run 2 bench --pipeline 64MiB --pipeline 0 && has "$err" "--pipeline given twice" &&
    run 2 bench --staging 1K && has "$err" "invalid value '1K' for --staging (4KiB or more)" &&
    run 2 bench --staging 8MiB --staging 16MiB && has "$err" "--staging given twice" &&
    run 2 bench --host-cache 1GiB --host-cache 2GiB && has "$err" "--host-cache given twice" &&
    run 2 bench --passes 2 --passes 3 && has "$err" "--passes given twice" &&
    run 0 bench -h && has "$out" "pooled (one allocation, a page between tensors"
}
outputs_honour_the_umask() { # a new file's mode is 0666 less the umask, as open(2) makes it
  (umask 022 && run 0 run --graph "$examples/seed.graph" --input "$T/a.npy" \
    --output "$T/um1.npy" --manifest "$T/um1.json") &&
    (umask 027 && run 0 run --graph "$examples/seed.graph" --input "$T/a.npy" \
      --output "$T/um2.npy") &&
    [[ $(stat -c %a "$T/um1.npy") == 644 && $(stat -c %a "$T/um1.json") == 644 &&
      $(stat -c %a "$T/um2.npy") == 640 ]] ||
    { stat -c "    %a %n" "$T"/um1.npy "$T"/um1.json "$T"/um2.npy; return 1; }
}
device_list_flags() { # --host-devices emulates devices, --devices picks among them
  run 0 run --graph "$examples/seed.graph" --input "$T/in_dir" --output "$T/dev_dir" \
    --host-devices 3 --devices 2,0 --json && "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "ok" and d["devices"] == 2 and d["done"] == 5, d' "$out" &&
    GR_HOST_DEVICES=2 GR_DEVICES=1 run 0 run --graph "$examples/seed.graph" \
      --input "$T/a.npy" --output "$T/dev1.npy" && np check-seed "$T/dev1.npy" "$T/a.npy" &&
    run 2 run --graph "$examples/seed.graph" --input "$T/a.npy" --output "$T/dev2.npy" \
      --devices 0,0 && has "$err" "invalid value '0,0' for --devices" && absent "$T/dev2.npy" &&
    GR_DEVICES=x run 2 run --graph "$examples/seed.graph" --input "$T/a.npy" \
      --output "$T/dev3.npy" && has "$err" "GR_DEVICES=x: invalid value" &&
    absent "$T/dev3.npy" && run 2 run --graph "$examples/seed.graph" --input "$T/a.npy" \
      --output "$T/dev4.npy" --host-devices 2 --devices 1,5 &&
    has "$err" "device 5 is not there (the host backend has 2 devices" &&
    absent "$T/dev4.npy"
}
manifest_of_one_process() {
  run 0 run --graph "$examples/seed.graph" --input "$T/in_dir" --output "$T/man_dir" \
    --manifest "$T/man.json" && has "$out" "manifest: $T/man.json" && "$py" -c '
import json, sys
m = json.load(open(sys.argv[1]))
assert m["status"] == "ok" and m["tensors"] == 5 and m["outputs_written"] == 5, m
assert [f["name"] for f in m["files"]] == [f"t{i}.npy" for i in range(1, 6)], m["files"]
assert all(f["rank"] == 0 for f in m["files"]), m["files"]' "$T/man.json"
}
refuses_bad_header() {
  printf '\x93NUMPY\x01\x00\x10\x00{garbage}      \n' >"$T/bad.npy" &&
    run 2 run --graph "$examples/seed.graph" --input "$T/bad.npy" --output "$T/bad_out.npy" &&
    has "$err" "bad.npy" && absent "$T/bad_out.npy"
}
refuses_wrong_dtype() {
  np make "$T/f8.npy" 10 7 --dtype f8 && run 2 run --graph "$examples/seed.graph" \
    --input "$T/f8.npy" --output "$T/f8_out.npy" &&
    has "$err" "$T/f8.npy holds float64 but the graph's in0 is float32: convert with a.astype(np.float32) or change the spec's buffer type" &&
    absent "$T/f8_out.npy" && run 2 run --graph "$examples/seed.graph" --input "$T/r.bin" \
    --dtype float64 --output "$T/f8_raw_out.bin" &&
    has "$err" "r.bin: --dtype float64, but the graph's in0 is float32: a raw file holds its port's type" &&
    absent "$T/f8_raw_out.bin" && np make "$T/i8.npy" 10 7 --dtype i8 &&
    run 2 run --graph "$examples/seed.graph" --input "$T/i8.npy" --output "$T/i8_out.npy" &&
    has "$err" "i8.npy: dtype '<i8' (int64) is not supported: graphrun reads float32, float16, bfloat16, float64, int32 and uint8" &&
    absent "$T/i8_out.npy"
}
refuses_fortran_order() {
  np make "$T/fo.npy" 4,5 8 --fortran && run 2 run --graph "$examples/seed.graph" \
    --input "$T/fo.npy" --output "$T/fo_out.npy" && has "$err" "ortran" && absent "$T/fo_out.npy"
}
refuses_shape_mismatch() {
  np make "$T/m10.npy" 10 9 && np make "$T/m11.npy" 11 9 && run 2 run --graph \
    "$examples/dag.graph" --input "$T/m10.npy" --input "$T/m11.npy" --output "$T/m0.npy" \
    --output "$T/m1.npy" && has "$err" "shape mismatch" && absent "$T/m0.npy" &&
    absent "$T/m1.npy" && run 2 run --graph "$examples/seed.graph" --input "$T/r.bin" \
    --shape 5,5 --output "$T/m_raw.bin" && has "$err" "shape mismatch" && absent "$T/m_raw.bin"
}
refuses_missing_file() {
  run 2 run --graph "$examples/seed.graph" --input "$T/nope.npy" --output "$T/nope_out.npy" &&
    has "$err" "nope.npy: No such file or directory" && absent "$T/nope_out.npy"
}
refuses_unwritable_output() {
  run 2 run --graph "$examples/seed.graph" --input "$T/a.npy" --output "$T/no/such/dir/o.npy" &&
    has "$err" "cannot create a file in" && absent "$T/no/such/dir/o.npy"
}
refuses_bad_spec_with_line_and_column() {
  printf 'buffer x\nh2d load: in0 -> x\nkernel k: mull(x) -> x\nd2h store: x -> out0\n' \
    >"$T/bad.graph" && run 2 run --graph "$T/bad.graph" --input "$T/a.npy" \
    --output "$T/spec_out.npy" && has "$err" "bad.graph:3:" && has "$err" "mull" &&
    absent "$T/spec_out.npy"
}
refuses_port_count_mismatch() {
  run 2 run --graph "$examples/dag.graph" --input "$T/a.npy" --output "$T/pc.npy" &&
    has "$err" "takes 2 input(s) and 2 output(s)" && absent "$T/pc.npy"
}
long_output_name() { # 244 bytes, legal: its temporary file takes a short hashed name
  local d="$T/long" name c
  name="$(printf 'n%.0s' {1..240}).npy"
  rm -rf "$d" && mkdir -p "$d" &&
    run 0 run --graph "$examples/seed.graph" --input "$T/a.npy" --output "$d/$name" &&
    np check-seed "$d/$name" "$T/a.npy" || return 1
  # What a run killed while writing it leaves is removed by the next; another's is not.
  c=$("$py" -c '
import sys
h = 0xcbf29ce484222325
for b in sys.argv[1].encode():
    h = ((h ^ b) * 0x100000001b3) % (1 << 64)
print(f".graphrun-tmp.{h:016x}")' "$name") || return 1
  echo partial >"$d/$c.AbC123" && echo other >"$d/.graphrun-tmp.0123456789abcdef.XyZ789" &&
    run 0 run --graph "$examples/seed.graph" --input "$T/a.npy" --output "$d/$name" --force &&
    np check-seed "$d/$name" "$T/a.npy" || return 1
  c=$(ls -A "$d" | grep '^\.') || true
  [[ $c == .graphrun-tmp.0123456789abcdef.XyZ789 ]] || { echo "    hidden files left: $c"; return 1; }
}
existing_output_needs_force() {
  cp "$T/a.npy" "$T/keep.npy" && run 2 run --graph "$examples/seed.graph" --input "$T/a.npy" \
    --output "$T/keep.npy" && has "$err" "exists (use --force" && cmp -s "$T/a.npy" "$T/keep.npy" &&
    run 0 run --graph "$examples/seed.graph" --input "$T/a.npy" --output "$T/keep.npy" --force &&
    np check-seed "$T/keep.npy" "$T/a.npy"
}
# The cases of a failing tensor and of a full disk run the fused seed graph (one kernel, not
# thirty: unfused_graph_equals_fused shows they compute the same), as nothing there depends
# on how long a tensor takes; the interrupt and SIGKILL cases run seed_unfused, slow enough
# to be stopped midway.
# The per-tensor cases below share 48 tensors of big_mib MiB (about 1.5 s with one worker
# at 4 MiB): each is one unit of work (1 MiB and more: not batched), so GR_FAULT=arena:3 fails
# exactly the third tensor to start, t02 with one worker. Under a sanitizer (GR_TEST_SANITIZER,
# set by .bazelrc's configs) the CPU kernels run several times slower, so the tensors are
# 1 MiB: a run still lasts seconds, long enough to interrupt mid-way, and the test keeps its
# margin on its time limit.
big_mib=4
[[ -z ${GR_TEST_SANITIZER:-} ]] || big_mib=1
big_inputs() {
  [[ -e $T/big_in/t47.npy ]] && return
  mkdir -p "$T/big_in" && "$py" -c '
import numpy as np, sys
rng = np.random.default_rng(1)
for i in range(48):
    np.save(f"{sys.argv[1]}/t{i:02d}.npy", rng.random(int(sys.argv[2]) << 18, dtype=np.float32))
' "$T/big_in" "$big_mib"
}
big_run() { # OUT_DIR EXTRA...: the shared run, in the background ($pid)
  local o=$1
  shift
  "$bin" run --graph "$examples/seed_unfused.graph" --input "$T/big_in" --output "$o" \
    --workers 1 --progress never "$@" >"$out" 2>"$err" &
  pid=$!
}
counts() { np check-manifest "$@" >"$T/counts" && cat "$T/counts"; }
wait_for_a_done_tensor() { # MANIFEST: until it records one (at most 20 s)
  local i
  for ((i = 0; i < 400; i++)); do
    grep -q '"status": "done"' "$1" 2>/dev/null && return
    sleep 0.05
  done
}
# SIGINT into the run: per tensor, once the manifest records a tensor done (so that some are
# done and, at about 30 ms a tensor, most are not); --all-or-nothing, which writes no
# manifest before the end, at a delay, retried sooner when the run finished first (which
# proves nothing either way). Not much sooner: a background job of a non-interactive shell
# starts with SIGINT ignored until graphrun installs its handler, so a signal sent at once
# could be lost. Sets rc.
interrupt_big_run() { # OUT_DIR EXTRA...
  local o=$1 delay
  shift
  for delay in 0.5 0.3 0.2; do
    rm -rf "$o" "$o.manifest.json"
    big_run "$o" "$@"
    if [[ ${1:-} == --all-or-nothing ]]; then
      sleep "$delay"
    else
      wait_for_a_done_tensor "$o.manifest.json"
    fi
    kill -INT "$pid"
    wait "$pid"
    rc=$?
    [[ $rc == 0 ]] || break
    echo "    finished before the signal: again"
  done
  [[ $rc == 130 ]] || { echo "    exit $rc, expected 130"; sed 's/^/    | /' "$out" "$err"; return 1; }
}
interrupted_run_keeps_what_is_done_and_resumes() {
  local rc pid c done before after
  big_inputs && interrupt_big_run "$T/big_out" || return 1
  c=$(counts "$T/big_out.manifest.json") || return 1
  done=$(sed 's/done=\([0-9]*\).*/\1/' <<<"$c")
  ((done > 0 && done < 48)) || { echo "    $c: want some done, not all"; return 1; }
  [[ $c == "done=$done failed=0 not_run=$((48 - done)) earlier=0" ]] || { echo "    $c"; return 1; }
  has "$err" "graphrun run: interrupted: $done of 48 done, written; $((48 - done)) not run; rerun with --resume" &&
    has "$out" "interrupted: $done of 48 tensors done, 0 failed, $((48 - done)) not run; $done outputs written" ||
    return 1
  ! grep -q 'first error' "$out" || { echo "    a first error of cancels:"; cat "$out"; return 1; }
  # --resume runs the rest only: the outputs already there are not written again.
  before=$(cd "$T/big_out" && stat -c '%n %i %Y' * | sort)
  run 0 run --graph "$examples/seed_unfused.graph" --input "$T/big_in" --output "$T/big_out" \
    --workers 1 --resume &&
    has "$out" "ok: 48 of 48 tensors done ($done by an earlier run), 0 failed, 0 not run; $((48 - done)) outputs written" ||
    return 1
  c=$(counts "$T/big_out.manifest.json") &&
    [[ $c == "done=48 failed=0 not_run=0 earlier=$done" ]] || { echo "    $c"; return 1; }
  after=$(cd "$T/big_out" && stat -c '%n %i %Y' $(cut -d' ' -f1 <<<"$before") | sort)
  [[ $before == "$after" ]] || { echo "    outputs of the earlier run were rewritten"; return 1; }
  # An input that changed since (its mtime) is run again; the others are not.
  touch -d '2001-01-01' "$T/big_in/t05.npy" &&
    run 0 run --graph "$examples/seed_unfused.graph" --input "$T/big_in" --output "$T/big_out" \
      --resume --json && "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "ok" and d["done"] == 48 and d["resumed"] == 47, d
assert d["outputs_written"] == 1 and d["bytes_in"] == int(sys.argv[2]) << 20, d' "$out" "$big_mib" &&
    counts "$T/big_out.manifest.json" >/dev/null
}
failing_tensor_stops_the_run() { # the default: no new tensor starts; what is done is kept
  local c done not_run
  big_inputs && rm -rf "$T/stop_out" &&
    GR_FAULT=arena:3 run 1 run --graph "$examples/seed.graph" --input "$T/big_in" \
      --output "$T/stop_out" --workers 1 || return 1
  c=$(counts "$T/stop_out.manifest.json") || return 1
  [[ $c =~ ^done=([0-9]+)\ failed=1\ not_run=([0-9]+)\ earlier=0$ ]] || { echo "    $c"; return 1; }
  done=${BASH_REMATCH[1]} not_run=${BASH_REMATCH[2]}
  ((not_run > 0 && done >= 2)) || { echo "    $c"; return 1; }
  has "$err" "tensor 2 ($T/big_in/t02.npy) failed: out of host memory: cannot place" &&
    has "$err" "(injected fault)" &&
    has "$err" "graphrun run: failed: $done of 48 done, written; 1 failed; $not_run not run; rerun with --resume" &&
    "$py" -c '
import json, sys
t = json.load(open(sys.argv[1]))["files"][2]
assert t["name"] == "t02.npy" and t["status"] == "failed", t
assert t["error"]["status"] == "out of host memory", t
assert "injected fault" in t["error"]["message"], t' "$T/stop_out.manifest.json" &&
    run 0 run --graph "$examples/seed.graph" --input "$T/big_in" \
      --output "$T/stop_out" --resume && c=$(counts "$T/stop_out.manifest.json") &&
    [[ $c == "done=48 failed=0 not_run=0 earlier=$done" ]] || { echo "    ${c:-}"; return 1; }
}
keep_going_past_a_failing_tensor() { # every other tensor done; the run still failed (1)
  local c
  big_inputs && rm -rf "$T/kg_out" &&
    GR_FAULT=arena:3 run 1 run --graph "$examples/seed.graph" --input "$T/big_in" \
      --output "$T/kg_out" --workers 1 --keep-going --json &&
    c=$(counts "$T/kg_out.manifest.json") &&
    [[ $c == "done=47 failed=1 not_run=0 earlier=0" ]] || { echo "    ${c:-}"; return 1; }
  # Honest counts: only the 47 that succeeded count, in bytes and throughput.
  "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "failed" and d["tensors"] == 48 and d["done"] == 47, d
assert d["failed"] == 1 and d["not_run"] == 0 and d["outputs_written"] == 47, d
assert d["bytes_in"] == d["bytes_out"] == 47 * (int(sys.argv[2]) << 20), d
f = d["failures"]
assert [x["index"] for x in f] == [2] and f[0]["input"].endswith("t02.npy"), f
assert f[0]["status"] == "out of host memory" and "injected" in f[0]["message"], f' "$out" \
    "$big_mib" &&
    GR_FAULT=arena:3 run 1 run --graph "$examples/seed.graph" --input "$T/big_in" \
      --output "$T/kg_out" --workers 1 --keep-going --force &&
    has "$out" "failed: 47 of 48 tensors done, 1 failed, 0 not run; 47 outputs written" &&
    has "$err" "graphrun run: failed: 47 of 48 done, written; 1 failed; 0 not run; rerun with --resume"
}
first_error_is_the_failure_not_a_cancel() { # an output not written (a full disk) stops the run
  local c
  # `ulimit -f` stands for the full disk: writing t04's 8 MiB output fails (EFBIG, SIGXFSZ
  # ignored), the others are 4 MiB; the stop then cancels the tensors not started.
  rm -rf "$T/fe_in" "$T/fe_out" && mkdir -p "$T/fe_in" && "$py" -c '
import numpy as np, sys
for i in range(24):
    np.save(f"{sys.argv[1]}/t{i:02d}.npy", np.ones(2 << 20 if i == 4 else 1 << 20, np.float32))
' "$T/fe_in" || return 1
  (ulimit -f 6144 && trap '' XFSZ && run 1 run --graph "$examples/seed.graph" \
    --input "$T/fe_in" --output "$T/fe_out" --workers 1 --progress never) || return 1
  c=$(counts "$T/fe_out.manifest.json") || return 1
  [[ $c =~ ^done=[0-9]+\ failed=1\ not_run=([1-9][0-9]*)\ earlier=0$ ]] || { echo "    $c"; return 1; }
  has "$out" "first error: index 4: " && has "$out" "File too large" &&
    has "$err" "first: tensor 4: " && ! grep -q 'canceled' "$out" "$err" ||
    { sed 's/^/    | /' "$out" "$err"; return 1; }
  # --json says the same: the failure is the output's (not "invalid argument"), and the
  # errors count exactly the failed tensors, by what failed.
  rm -rf "$T/fe_out" "$T/fe_out.manifest.json" &&
    (ulimit -f 6144 && trap '' XFSZ && run 1 run --graph "$examples/seed.graph" \
      --input "$T/fe_in" --output "$T/fe_out" --workers 1 --json) && "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["failed"] == 1 and d["not_run"] > 0, d
assert d["errors"] == {"output not written": 1}, d["errors"]
e = d["first_error"]
assert e["status"] == "output not written" and e["index"] == 4, e
assert "File too large" in e["message"], e' "$out"
}
full_disk_is_said_as_such() { # ENOSPC on the second output: its tensor failed, saying so
  rm -rf "$T/fd_out" "$T/fd_out.manifest.json" &&
    GR_TEST_IO_FAULT=enospc:2 run 1 run --graph "$examples/seed.graph" --input "$T/in_dir" \
      --output "$T/fd_out" --keep-going --json && "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["done"] == 4 and d["failed"] == 1 and d["not_run"] == 0, d
assert sum(d["errors"].values()) == d["failed"], d
assert d["errors"] == {"output not written": 1}, d["errors"]
e = d["first_error"]
assert e["status"] == "output not written", e
assert "cannot write: No space left on device" in e["message"], e
m = json.load(open(sys.argv[2]))
f = [x for x in m["files"] if x["status"] == "failed"]
assert len(f) == 1 and f[0]["error"]["status"] == "output not written", f
' "$out" "$T/fd_out.manifest.json" && counts "$T/fd_out.manifest.json" >/dev/null
}
all_or_nothing_keeps_the_old_way() { # nothing written unless every tensor is done
  local rc pid
  big_inputs && interrupt_big_run "$T/aon_out" --all-or-nothing &&
    has "$err" "interrupted" && has "$err" "no output written" &&
    [[ -z $(ls -A "$T/aon_out" 2>/dev/null) && ! -e $T/aon_out.manifest.json ]] ||
    { echo "    left:"; ls -A "$T/aon_out" "$T"/aon_out.manifest.json; return 1; }
  rm -rf "$T/aon_out" && GR_FAULT=arena:3 run 1 run --graph "$examples/seed_unfused.graph" \
    --input "$T/big_in" --output "$T/aon_out" --workers 1 --all-or-nothing &&
    has "$err" "failed: no output written" &&
    [[ -z $(ls -A "$T/aon_out" 2>/dev/null) && ! -e $T/aon_out.manifest.json ]] || return 1
  run 0 run --graph "$examples/seed_unfused.graph" --input "$T/big_in" --output "$T/aon_out" \
    --all-or-nothing && counts "$T/aon_out.manifest.json" >/dev/null &&
    [[ $(cat "$T/counts") == "done=48 failed=0 not_run=0 earlier=0" ]] &&
    run 2 run --graph "$examples/seed.graph" --input "$T/a.npy" --output "$T/aon.npy" \
      --all-or-nothing --resume && has "$err" "not with --resume" && absent "$T/aon.npy"
}
sigkill_leaves_no_partial_output() { # SIGKILL mid-run; the next run cleans up and goes on
  local pid c
  big_inputs && rm -rf "$T/kill_out" "$T/kill_out.manifest.json" && big_run "$T/kill_out" ||
    return 1
  wait_for_a_done_tensor "$T/kill_out.manifest.json"
  kill -KILL "$pid"
  wait "$pid"
  # Whatever the moment: every file under an output's name is whole, and the manifest too.
  "$py" - "$T/kill_out" "$T/big_in" "$tool" <<'PY' || return 1
import os, sys
sys.path.insert(0, os.path.dirname(sys.argv[3]))
import numpy as np, npy_tool
for n in os.listdir(sys.argv[1]):
    if not n.startswith("."):
        npy_tool.same(np.load(f"{sys.argv[1]}/{n}"),
                      npy_tool.seed(np.load(f"{sys.argv[2]}/{n}")), n)
PY
  counts "$T/kill_out.manifest.json" --killed >/dev/null || return 1
  # What a process killed while writing leaves: a temporary file beside an output (made
  # here, since the moment is hard to hit), and one beside a name that is not an output.
  head -c 1000 "$T/big_in/t07.npy" >"$T/kill_out/.t07.npy.graphrun-tmp.AbC123" &&
    echo mine >"$T/kill_out/.notes.graphrun-tmp.XyZ789" &&
    run 0 run --graph "$examples/seed_unfused.graph" --input "$T/big_in" \
      --output "$T/kill_out" --workers 1 --resume || return 1
  c=$(ls -A "$T/kill_out" | grep '^\.') || true
  [[ $c == .notes.graphrun-tmp.XyZ789 ]] || { echo "    hidden files left: $c"; return 1; }
  rm "$T/kill_out/.notes.graphrun-tmp.XyZ789" && c=$(counts "$T/kill_out.manifest.json") &&
    [[ $c =~ ^done=48\ failed=0\ not_run=0\ earlier=[1-9] ]] || { echo "    ${c:-}"; return 1; }
}
resume_matches_by_input_paths() { # not by index: a file added first moves every index
  rm -rf "$T/rp_in" "$T/rp_out" "$T/rp_out.manifest.json" && cp -r "$T/in_dir" "$T/rp_in" &&
    run 0 run --graph "$examples/seed.graph" --input "$T/rp_in" --output "$T/rp_out" &&
    np make "$T/rp_in/a00.npy" 50 70 &&
    run 0 run --graph "$examples/seed.graph" --input "$T/rp_in" --output "$T/rp_out" \
      --resume --json && "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "ok" and d["done"] == 6 and d["resumed"] == 5, d
assert d["outputs_written"] == 1, d' "$out" || return 1
  local i
  for i in a00 t1 t2 t3 t4 t5; do np check-seed "$T/rp_out/$i.npy" "$T/rp_in/$i.npy" || return 1; done
  [[ $(counts "$T/rp_out.manifest.json") == "done=6 failed=0 not_run=0 earlier=5" ]]
}
resume_refuses_other_flags() { # --dtype, --shape, --raw and kernel files decide the outputs too
  local m="$T/rf.manifest.json" g="$examples/seed.graph"
  rm -f "$T/rf_out.bin" "$m" &&
    run 0 run --graph "$g" --input "$T/r.bin" --output "$T/rf_out.bin" --shape 4,6 \
      --manifest "$m" && "$py" -c '
import json, sys
s = json.load(open(sys.argv[1]))["settings"]
assert s == {"dtype": None, "shape": "4,6", "raw": False, "kernel_files": []}, s' "$m" &&
    run 2 run --graph "$g" --input "$T/r.bin" --output "$T/rf_out.bin" --shape 2,12 \
      --manifest "$m" --resume &&
    has "$err" "--resume: --shape differs from the run that wrote $m: every output may be stale" &&
    run 2 run --graph "$g" --input "$T/r.bin" --output "$T/rf_out.bin" --shape 4,6 \
      --dtype float32 --manifest "$m" --resume && has "$err" "--resume: --dtype differs from" &&
    run 0 run --graph "$g" --input "$T/r.bin" --output "$T/rf_out.bin" --shape 4,6 \
      --manifest "$m" --resume --json && "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "ok" and d["resumed"] == 1 and d["outputs_written"] == 0, d' "$out" ||
    return 1
  # Kernel files, given (--kernels) or named by the spec (cuda "FILE"): NVRTC compiles them.
  if ! ldconfig -p | grep -q libnvrtc.so.13 && [[ ! -e ${CUDA_PATH:-/usr/local/cuda}/lib64/libnvrtc.so.13 ]]; then
    echo "    (no NVRTC on this machine: kernel files not tried)"
    return
  fi
  rm -rf "$T/rk" && mkdir -p "$T/rk" && cp "$examples/user_kernel.cu" "$T/rk/k.cu" &&
    cp "$examples/user_kernel.cu" "$T/rk/k2.cu" &&
    { echo 'cuda "k.cu"'; cat "$g"; } >"$T/rk/g.graph" &&
    run 0 run --graph "$T/rk/g.graph" --kernels "$T/rk/k2.cu" --input "$T/a.npy" \
      --output "$T/rk/o.npy" --manifest "$m" --force && "$py" -c '
import json, sys
f = json.load(open(sys.argv[1]))["settings"]["kernel_files"]
assert [x["path"] for x in f] == [sys.argv[2] + "/k2.cu", sys.argv[2] + "/k.cu"], f' "$m" "$T/rk" &&
    touch -d '2001-01-01' "$T/rk/k.cu" &&
    run 2 run --graph "$T/rk/g.graph" --kernels "$T/rk/k2.cu" --input "$T/a.npy" \
      --output "$T/rk/o.npy" --manifest "$m" --resume &&
    has "$err" "--resume: the kernel files (--kernels, the spec's cuda lines) changed since the run that wrote $m"
}
resume_refuses_a_changed_graph() { # every output may be stale: none is skipped
  cp "$examples/seed.graph" "$T/g.graph" && rm -rf "$T/rg_out" &&
    run 0 run --graph "$T/g.graph" --input "$T/in_dir" --output "$T/rg_out" &&
    touch -d '2001-01-01' "$T/g.graph" &&
    run 2 run --graph "$T/g.graph" --input "$T/in_dir" --output "$T/rg_out" --resume &&
    has "$err" "--resume: the graph file changed since the run that wrote $T/rg_out.manifest.json" &&
    [[ $(counts "$T/rg_out.manifest.json") == "done=5 failed=0 not_run=0 earlier=0" ]]
}
usage_mistakes_in_runs_terms() { # --json abbreviated; getopt's mistakes named as run's
  run 2 run --js --bogus && has "$err" "graphrun run: unrecognized option '--bogus'" && "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "refused" and d["error"] == "unrecognized option '"'"'--bogus'"'"'", d' "$out" &&
    run 2 run --graph && has "$err" "graphrun run: option '--graph' requires a value" &&
    run 2 run --m x && has "$err" "graphrun run: ambiguous option '--m'" &&
    run 2 run --jso --graph "$examples/seed.graph" --input "$T/a.npy" --out=- &&
    [[ ! -s $out ]] && has "$err" "--json prints on stdout" || return 1
  # --resume finding no manifest says so only when the run goes ahead.
  printf '%s\n' "$T/in_dir/t1.npy" "$T/no_such.npy" >"$T/rn_in.txt" &&
    run 2 run --graph "$examples/seed.graph" --input "@$T/rn_in.txt" --output "$T/rn_out" \
      --resume && ! grep -q 'no manifest at' "$err" &&
    printf '%s\n' "$T/in_dir/t1.npy" >"$T/rn_in.txt" &&
    run 0 run --graph "$examples/seed.graph" --input "@$T/rn_in.txt" --output "$T/rn_out" \
      --resume && has "$err" "--resume: no manifest at $T/rn_out.manifest.json" ||
    { sed 's/^/    | /' "$err"; return 1; }
}
refusals_in_json_create_nothing() { # one JSON object for every refusal; nothing on disk
  local line want
  # Inputs: directories of other names, a list's output whose directory is not there (the
  # second one: every output directory is probed).
  mkdir -p "$T/rj_a" "$T/rj_b" && np make "$T/rj_a/x.npy" 10 90 && np make "$T/rj_b/x.npy" 10 91 &&
    np make "$T/rj_b/y.npy" 10 92 && printf '%s\n' "$T/in_dir/t1.npy" "$T/in_dir/t2.npy" \
      >"$T/rj_in.txt" && printf '%s\n' "$T/rj_a/o.npy" "$T/ref_out_missing/o.npy" >"$T/rj_out.txt" ||
    return 1
  while IFS= read -r line; do
    eval "set -- $line"
    want=$1
    shift
    rm -rf "$T"/ref_out*
    run 2 run "$@" --json </dev/null && "$py" -c '
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1, lines
d = json.loads(lines[0])
assert d["status"] == "refused" and d["exit"] == 2, d
assert sys.argv[2] in d["error"], (d, sys.argv[2])' "$out" "$want" || return 1
    [[ -z $(ls -d "$T"/ref_out* 2>/dev/null) ]] &&
      ! ls -A "$T" | grep -q '^\.ref_out' || { echo "    created:"; ls -d "$T"/ref_out*; return 1; }
  done <<CASES
"--budget" --graph "$examples/seed.graph" --input "$T/in_dir" --output "$T/ref_out" --budget 1
"unrecognized option" --graph "$examples/seed.graph" --input "$T/in_dir" --output "$T/ref_out" --bogus
"cannot read" --graph "$T/no.graph" --input "$T/in_dir" --output "$T/ref_out"
"request exceeds the device memory budget" --graph "$examples/softmax.graph" --input "$T/in_dir" --output "$T/ref_out" --budget 256
"--resume needs the manifest" --graph "$examples/seed.graph" --input "$T/a.npy" --output "$T/ref_out" --resume
"--contexts private does not apply to the host backend" --graph "$examples/seed.graph" --input "$T/in_dir" --output "$T/ref_out" --contexts private
"--mpi-timeout applies to --mpi runs only" --graph "$examples/seed.graph" --input "$T/in_dir" --output "$T/ref_out" --mpi-timeout 5
"--graph given twice" --graph "$examples/seed.graph" --graph "$examples/seed.graph" --input "$T/in_dir" --output "$T/ref_out"
"is named like a file" --graph "$examples/seed.graph" --input "$T/in_dir" --output "$T/ref_out.npy"
"input directory $T/rj_b has y.npy, which $T/rj_a lacks" --graph "$examples/dag.graph" --input "$T/rj_a" --input "$T/rj_b" --output "$T/ref_out" --output "$T/ref_out2"
"--resume does not apply to --input - or --output -" --graph "$examples/seed.graph" --input - --output "$T/ref_out" --resume
"cannot create a file in $T/ref_out_missing" --graph "$examples/seed.graph" --input "@$T/rj_in.txt" --output "@$T/rj_out.txt"
CASES
}

# Inputs: what a directory holds, lists, stdin and stdout, flags that do not apply.
lists_per_tensor_and_resume() { # @LIST in and out, outputs in two directories, per tensor
  local c
  big_inputs && rm -rf "$T/lr" && mkdir -p "$T/lr/o1" "$T/lr/o2" &&
    printf '../big_in/t%s.npy\n' 00 01 02 03 04 05 >"$T/lr/in.txt" &&
    printf 'o1/a.npy\no2/b.npy\no1/c.npy\no2/d.npy\no1/e.npy\no2/f.npy\n' >"$T/lr/out.txt" &&
    echo torn >"$T/lr/o2/.d.npy.graphrun-tmp.AbC123" && # a killed run's, in the second directory
    GR_FAULT=arena:3 run 1 run --graph "$examples/seed_unfused.graph" --input "@$T/lr/in.txt" \
      --output "@$T/lr/out.txt" --workers 1 --keep-going --json &&
    [[ ! -e $T/lr/o2/.d.npy.graphrun-tmp.AbC123 ]] &&
    has "$err" "rerun with --resume" || return 1
  # The manifest (beside the output list) names the paths the lists resolve to.
  "$py" - "$T/lr" "$tool" <<'PY' || return 1
import json, os, sys
sys.path.insert(0, os.path.dirname(sys.argv[2]))
import numpy as np, npy_tool
d = sys.argv[1]
m = json.load(open(d + "/out.txt.manifest.json"))
outs = ["o1/a.npy", "o2/b.npy", "o1/c.npy", "o2/d.npy", "o1/e.npy", "o2/f.npy"]
failed = [f for f in m["files"] if f["status"] == "failed"]
assert len(failed) == 1 and len(m["files"]) == 6, m["files"]
for i, f in enumerate(m["files"]):
    assert f["outputs"] == [f"{d}/{outs[i]}"], f
    assert f["inputs"][0]["path"] == f"{d}/../big_in/t{i:02d}.npy", f
    assert f["name"] == f"t{i:02d}.npy", f
    if f["status"] == "done":
        npy_tool.same(np.load(f["outputs"][0]),
                      npy_tool.seed(np.load(f["inputs"][0]["path"])), outs[i])
    else:
        assert not os.path.exists(f["outputs"][0]), f
PY
  run 0 run --graph "$examples/seed_unfused.graph" --input "@$T/lr/in.txt" \
    --output "@$T/lr/out.txt" --resume &&
    has "$out" "ok: 6 of 6 tensors done (5 by an earlier run), 0 failed, 0 not run; 1 outputs written" &&
    for o in o1/a o2/b o1/c o2/d o1/e o2/f; do
      [[ -s $T/lr/$o.npy ]] || { echo "    no $o.npy"; return 1; }
    done
}
stdout_only_after_success() { # per tensor into $TMPDIR; stdout gets it only when all is done
  local tmp="$T/stdout_tmp"
  mkdir -p "$tmp" && TMPDIR="$tmp" GR_FAULT=arena:1 "$bin" run --graph "$examples/seed.graph" \
    --input - --output - <"$T/a.npy" >"$T/pipe_f.npy" 2>"$err"
  [[ $? == 1 && ! -s $T/pipe_f.npy && -z $(ls -A "$tmp") ]] &&
    has "$err" "tensor 0 (stdin) failed" && has "$err" "nothing written to stdout" || return 1
  TMPDIR="$tmp" "$bin" run --graph "$examples/seed.graph" --input - --output - --manifest \
    "$T/pipe.manifest.json" <"$T/a.npy" >"$T/pipe_m.npy" 2>"$err" &&
    np check-seed "$T/pipe_m.npy" "$T/a.npy" && [[ -z $(ls -A "$tmp") ]] && "$py" -c '
import json, sys
f = json.load(open(sys.argv[1]))["files"][0]
assert f["status"] == "done" and f["outputs"] == ["-"] and f["inputs"][0]["path"] == "-", f' \
      "$T/pipe.manifest.json"
}
stdout_leaves_nothing_in_tmpdir() { # the tensor's file is unlinked at once: SIGKILL leaves none
  local tmp="$T/so_tmp" pid left
  big_inputs && rm -rf "$tmp" "$T/so_fifo" && mkdir -p "$tmp" && mkfifo "$T/so_fifo" || return 1
  exec 3<>"$T/so_fifo" # held open both ways: the writer opens at once and blocks once full
  TMPDIR=$tmp "$bin" run --graph "$examples/seed.graph" --input "$T/big_in/t00.npy" \
    --output - >"$T/so_fifo" 2>"$err" &
  pid=$!
  head -c 1 <&3 >/dev/null # the tensor is being copied to stdout, MiBs into 64 KiB
  left=$(find "$tmp" -type f)
  kill -KILL "$pid"
  wait "$pid"
  exec 3>&-
  left+=$(find "$tmp" -type f)
  [[ -z $left ]] || { echo "    left in \$TMPDIR: $left"; return 1; }
}
directory_skips_what_is_not_a_tensor() { # only .npy; the rest named on stderr and in --json
  mkdir -p "$T/sk_in/sub" && cp "$T/in_dir"/t1.npy "$T/in_dir"/t2.npy "$T/sk_in/" &&
    printf 'notes' >"$T/sk_in/notes.txt" && touch "$T/sk_in/sub/t3.npy" &&
    run 0 run --graph "$examples/seed.graph" --input "$T/sk_in" --output "$T/sk_out" --json &&
    has "$err" "warning: skipped 2 entries of the input directories that are not tensors: $T/sk_in/notes.txt, $T/sk_in/sub/" &&
    "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "ok" and d["tensors"] == 2, d
assert d["skipped"] == [sys.argv[2] + "/notes.txt", sys.argv[2] + "/sub/"], d["skipped"]' \
      "$out" "$T/sk_in" && [[ $(ls "$T/sk_out") == $'t1.npy\nt2.npy' ]] &&
    np check-seed "$T/sk_out/t1.npy" "$T/in_dir/t1.npy" || return 1
  # --raw: every file is a tensor (notes.txt is 5 bytes, not a whole float32: refused).
  run 2 run --graph "$examples/seed.graph" --input "$T/in_dir" --output "$T/sk_out2" --raw &&
    has "$err" "t1.npy: a .npy file, whose header gives its type and shape, but --raw is for raw files: drop --raw" &&
    absent "$T/sk_out2" && mkdir -p "$T/raw_dir" && np make "$T/raw_dir/a" 8 70 --raw &&
    np make "$T/raw_dir/b.bin" 8 71 --raw && run 0 run --graph "$examples/seed.graph" \
      --input "$T/raw_dir" --output "$T/raw_out" --dtype float32 &&
    np check-raw-seed "$T/raw_out/a" "$T/raw_dir/a" 8 &&
    np check-raw-seed "$T/raw_out/b.bin" "$T/raw_dir/b.bin" 8
}
directories_must_match() { # a name in one input directory only: refused, both ways, named
  mkdir -p "$T/mm_a" "$T/mm_b" && np make "$T/mm_a/x.npy" 100,3 72 &&
    np make "$T/mm_b/x.npy" 100,3 73 && np make "$T/mm_b/y.npy" 100,3 74 && cd "$T" &&
    run 2 run --graph "$examples/dag.graph" --input mm_a --input mm_b --output mm_o0 \
      --output mm_o1 &&
    has "$err" "input directory mm_b has y.npy, which mm_a lacks (every input directory holds the same tensor names)" &&
    absent mm_o0 && absent mm_o1 &&
    run 2 run --graph "$examples/dag.graph" --input mm_b --input mm_a --output mm_o0 \
      --output mm_o1 && has "$err" "input directory mm_a lacks y.npy, which mm_b has" &&
    absent mm_o0 && np make mm_a/z.npy 100,3 77 &&
    run 2 run --graph "$examples/dag.graph" --input mm_a --input mm_b --output mm_o0 \
      --output mm_o1 &&
    has "$err" "input directory mm_b lacks z.npy, which mm_a has, and has y.npy, which mm_a lacks" &&
    rm mm_b/y.npy mm_a/z.npy && run 0 run --graph "$examples/dag.graph" --input mm_a \
      --input mm_b --output mm_o0 --output mm_o1 &&
    np check-dag mm_o0/x.npy mm_o1/x.npy mm_a/x.npy mm_b/x.npy
  local rc=$?
  cd - >/dev/null
  return $rc
}
directory_output_named_like_a_file() { # was: a directory called single.npy
  run 2 run --graph "$examples/seed.graph" --input "$T/in_dir" --output "$T/single.npy" &&
    has "$err" "--output $T/single.npy: the inputs are directories, so each output is a directory of one file per tensor, and $T/single.npy is named like a file" &&
    absent "$T/single.npy" && touch "$T/afile" &&
    run 2 run --graph "$examples/seed.graph" --input "$T/in_dir" --output "$T/afile" &&
    has "$err" "and $T/afile is a file" && [[ -f $T/afile && ! -s $T/afile ]]
}
input_lists() { # @LIST: blanks and '#' skipped, relative to the list's own directory
  mkdir -p "$T/lists/sub" && np make "$T/lists/sub/p.npy" 40 75 && np make "$T/lq.npy" 50 76 &&
    printf '# tensors\n\n  sub/p.npy  \r\n%s\n' "$T/lq.npy" >"$T/lists/in.txt" &&
    (cd / && run 0 run --graph "$examples/seed.graph" --input "@$T/lists/in.txt" \
      --output "$T/lo_dir") && np check-seed "$T/lo_dir/p.npy" "$T/lists/sub/p.npy" &&
    np check-seed "$T/lo_dir/lq.npy" "$T/lq.npy" &&
    printf 'one.npy\nout/two.npy\n' >"$T/lists/out.txt" && mkdir -p "$T/lists/out" &&
    run 0 run --graph "$examples/seed.graph" --input "@$T/lists/in.txt" \
      --output "@$T/lists/out.txt" && np check-seed "$T/lists/one.npy" "$T/lists/sub/p.npy" &&
    np check-seed "$T/lists/out/two.npy" "$T/lq.npy" || return 1
  printf 'a.npy\n' >"$T/lists/short.txt" &&
    run 2 run --graph "$examples/seed.graph" --input "@$T/lists/in.txt" \
      --output "@$T/lists/short.txt" &&
    has "$err" "lists 1 paths but the inputs are 2 tensors" && absent "$T/lists/a.npy" &&
    printf '# nothing\n\n' >"$T/lists/empty.txt" &&
    run 2 run --graph "$examples/seed.graph" --input "@$T/lists/empty.txt" --output "$T/le" &&
    has "$err" "holds no paths" && absent "$T/le" &&
    printf '%s\n%s\n' "$T/in_dir/t1.npy" "$T/lists/sub/../../in_dir/t1.npy" >"$T/lists/dup.txt" &&
    run 2 run --graph "$examples/seed.graph" --input "@$T/lists/dup.txt" --output "$T/ld" &&
    has "$err" "names two files called t1.npy" && absent "$T/ld" &&
    run 2 run --graph "$examples/seed.graph" --input "@$T/lists/in.txt" --output "$T/l.npy" &&
    has "$err" "named like a file" && absent "$T/l.npy"
}
stdin_and_stdout() { # one tensor through a pipe, .npy or raw; the report on stderr then
  "$bin" run --graph "$examples/seed.graph" --input - --output - <"$T/a.npy" >"$T/pipe.npy" \
    2>"$err" && np check-seed "$T/pipe.npy" "$T/a.npy" && has "$err" "ok: 1 of 1 tensors done" &&
    ! ls "${TMPDIR:-/tmp}" | grep -q "graphrun-stdout" || return 1
  "$bin" run --graph "$examples/seed.graph" --input - --output "$T/pipe_raw.bin" --dtype float32 \
    --shape 4,6 <"$T/r.bin" >"$out" 2>"$err" &&
    np check-raw-seed "$T/pipe_raw.bin" "$T/r.bin" 4,6 &&
    "$bin" run --graph "$examples/seed.graph" --input "$T/r.bin" --output - >"$T/pipe2.npy" \
      2>"$err" && "$py" -c '
import numpy as np, sys
assert np.load(sys.argv[1]).shape == (24,)' "$T/pipe2.npy" || return 1
  "$bin" run --graph "$examples/seed.graph" --input - --output "$T/pipe3.npy" <"$T/r.bin" \
    >"$out" 2>"$err"; [[ $? == 2 ]] &&
    has "$err" "stdin does not start with a .npy header; raw data on stdin needs --dtype" &&
    absent "$T/pipe3.npy" && run 2 run --graph "$examples/seed.graph" --input "$T/a.npy" \
      --output - --json && has "$err" "--json prints on stdout, which --output - takes" &&
    [[ ! -s $out ]] && run 2 run --graph "$examples/seed.graph" --input "$T/in_dir" \
      --output - && has "$err" "--output - (stdout) takes one tensor; the inputs are directories"
}
flags_that_do_not_apply() { # refused in the flag's terms (exit 2); warned when auto chose
  run 2 run --graph "$examples/seed.graph" --input "$T/a.npy" --output "$T/na1.npy" \
    --shape 3,5,7 && has "$err" "a.npy: a .npy file, whose header gives its type and shape, but --shape is for raw files: drop --shape" &&
    absent "$T/na1.npy" && run 2 run --graph "$examples/seed.graph" --input "$T/a.npy" \
      --output "$T/na1.npy" --dtype float32 && has "$err" "but --dtype is for raw files" &&
    absent "$T/na1.npy" && run 2 run --graph "$examples/seed.graph" --graph "$examples/dag.graph" \
      --input "$T/a.npy" --output "$T/na1.npy" &&
    has "$err" "graphrun run: --graph given twice: give it once" && absent "$T/na1.npy" &&
    run 2 run --graph "$examples/seed.graph" --input "$T/a.npy" --output "$T/na1.npy" \
      --contexts private &&
    has "$err" "--contexts private does not apply to the host backend" &&
    ! grep -q context_mode "$err" && absent "$T/na1.npy" &&
    run 2 run --graph "$examples/seed.graph" --input "$T/a.npy" --output "$T/na1.npy" \
      --ceilings && has "$err" "--ceilings does not apply to the host backend" &&
    absent "$T/na1.npy" && run 2 run --graph "$examples/seed.graph" --input "$T/a.npy" \
      --output "$T/na1.npy" --mpi-timeout 5 &&
    has "$err" "--mpi-timeout applies to --mpi runs only" &&
    absent "$T/na1.npy" && run 2 run --graph "$examples/seed.graph" --input "$T/a.npy" \
      --output "$T/na1.npy" --budget 1M --budget 2M && has "$err" "--budget given twice" &&
    absent "$T/na1.npy" || return 1
  # Auto: on the host backend (no GPU here) both are warned about, and the run goes on.
  GR_BACKEND=auto run 0 run --graph "$examples/seed.graph" --input "$T/a.npy" \
    --output "$T/na2.npy" --contexts private --ceilings && np check-seed "$T/na2.npy" "$T/a.npy" &&
    { ! grep -q "auto chose the host" "$err" ||
      { has "$err" "warning: --contexts private does not apply" &&
        has "$err" "warning: --ceilings does not apply"; }; } || return 1
  for cmd in demo stress; do
    run 2 "$cmd" --workers 1 --workers 2 && has "$err" "graphrun $cmd: --workers given twice" ||
      return 1
  done
  run 2 demo --contexts private --count 1 --elems 16 &&
    has "$err" "--contexts private does not apply to the host backend"
}
check_says_which_flags_it_takes() { # the help as check behaves: run's flags but how a run goes
  local f
  for f in --resume --keep-going --all-or-nothing "--manifest=$T/cm.json" "--progress=never" \
    --mpi "--mpi-timeout=5" --ceilings; do
    run 2 check --graph "$examples/seed.graph" --input "$T/a.npy" "$f" &&
      has "$err" "graphrun check: $f is a flag of graphrun run (how a run goes, not what it checks): drop it" ||
      return 1
  done
  run 0 check --help && has "$out" "--keep-going, --all-or-nothing, --manifest, --progress, --mpi and --mpi-timeout" &&
    run 0 run --help && has "$out" "--resume, --keep-going, --all-or-nothing, --manifest, --progress, --mpi and" &&
    ! grep -q 'tries the same command line' "$out" && [[ ! -e $T/cm.json ]]
}
check_is_a_dry_run() { # footprints, the least budget, the cuts; nothing created or run
  mkdir -p "$T/ck_in" && np make "$T/ck_in/big.npy" 30000 80 && np make "$T/ck_in/s1.npy" 10 81 &&
    np make "$T/ck_in/s2.npy" 12 82 && printf 'x' >"$T/ck_in/readme" &&
    run 0 check --graph "$examples/seed.graph" --input "$T/ck_in" --budget 16K \
      --output "$T/ck_out" --json && absent "$T/ck_out" && "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "ok" and d["tensors"] == 3 and d["budget_bytes"] == 16384, d
assert d["splittable"] and d["least_budget_bytes"] == 256, d
f = {t["name"]: t for t in d["files"]}
assert f["big.npy"]["cut"] == "chunked" and f["big.npy"]["pieces"] > 1, f["big.npy"]
assert f["big.npy"]["footprint_bytes"] == 120064 and f["big.npy"]["shape"] == [30000], f
assert f["s1.npy"]["cut"] == "batched" and f["s1.npy"]["batch"] == 2, f["s1.npy"]
assert d["units"] == f["big.npy"]["pieces"] + 1, d["units"]
assert d["bytes_in"] == d["bytes_out"] == 4 * 30022, d
assert d["skipped"] == [sys.argv[2] + "/readme"], d["skipped"]' "$out" "$T/ck_in" &&
    run 0 check --graph "$examples/seed.graph" --input "$T/ck_in" --budget 16K &&
    has "$out" "big.npy: shape (30000), 30000 elements, footprint 117.25 KiB: chunked into" &&
    has "$out" "s1.npy: shape (10), 10 elements, footprint 256 B: batched, 2 tensors to a unit" &&
    has "$out" "ok: 3 tensors" && has "$err" "warning: skipped 1 entry" || return 1
  # A graph that cannot be cut: refused as run refuses it, with the least budget it needs.
  run 2 check --graph "$examples/softmax.graph" --input "$T/ck_in" --budget 16K --json &&
    "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "refused" and d["exit"] == 2 and not d["splittable"], d
assert d["least_budget_bytes"] == 240128 and "cannot be split" in d["error"], d' "$out" &&
    run 2 run --graph "$examples/softmax.graph" --input "$T/ck_in" --budget 16K \
      --output "$T/ck_out" && has "$err" "cannot be split" &&
    [[ -z $(ls -A "$T/ck_out" 2>/dev/null) ]] &&
    run 0 check --graph "$examples/softmax.graph" --input "$T/ck_in" --budget 240128 &&
    run 0 run --graph "$examples/softmax.graph" --input "$T/ck_in" --budget 240128 \
      --output "$T/ck_out" && np check-softmax "$T/ck_out/big.npy" "$T/ck_in/big.npy" || return 1
  # Refusals as run's, in --json too; stdin; -h.
  run 2 check --graph "$T/nope.graph" --input "$T/a.npy" --json && "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "refused" and d["exit"] == 2 and "nope.graph" in d["error"], d' "$out" &&
    run 2 check --graph "$examples/seed.graph" --input "$T/f8.npy" &&
    has "$err" "holds float64 but the graph's in0 is float32" &&
    run 2 check --graph "$examples/seed.graph" --input "$T/a.npy" --output "$T/a.npy" &&
    has "$err" "exists (use --force" && "$bin" check --graph "$examples/seed.graph" --input - \
      <"$T/a.npy" >"$out" 2>"$err" && has "$out" "stdin: shape (3,5,7), 105 elements" &&
    run 0 check -h && has "$out" "usage: graphrun check"
}

# The driver at its edges: bad files in the middle of a dataset, what `check` reports, the
# time, help and progress lines it prints, outputs compared as files.
bad_inputs_all_named_in_one_pass() { # refused, every one named; --keep-going runs the rest
  local d="$T/bi" i
  rm -rf "$d" "$T/bi_out" "$T/bi_out.manifest.json" && mkdir -p "$d" || return 1
  for i in 0 1 2 3 4 5; do np make "$d/t$i.npy" "$((100 + i))" "$((200 + i))" || return 1; done
  head -c 300 "$d/t1.npy" >"$d/t1.tmp" && mv "$d/t1.tmp" "$d/t1.npy" &&
    printf '\x93NUMPY\x01\x00\x10\x00{garbage}      \n' >"$d/t3.npy" &&
    np make "$d/t4.npy" 50 204 --dtype f8 || return 1
  run 2 run --graph "$examples/seed.graph" --input "$d" --output "$T/bi_out" --json &&
    has "$err" "$d/t1.npy: the header says shape (101,) (404 bytes of float32 data after a 128-byte header) but the file has 300 bytes: truncated" &&
    has "$err" "$d/t3.npy: malformed .npy header" &&
    has "$err" "$d/t4.npy holds float64 but the graph's in0 is float32" &&
    has "$err" "3 inputs cannot be read (listed above): nothing run" &&
    [[ -z $(ls -A "$T/bi_out" 2>/dev/null) && ! -e $T/bi_out.manifest.json ]] && "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "refused" and d["exit"] == 2 and "3 inputs cannot be read" in d["error"], d' \
      "$out" || return 1
  run 2 check --graph "$examples/seed.graph" --input "$d" && has "$err" "t1.npy" &&
    has "$err" "t3.npy" && has "$err" "t4.npy" && has "$err" "3 inputs cannot be read" &&
    run 1 run --graph "$examples/seed.graph" --input "$d" --output "$T/bi_out" --keep-going \
      --json && "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["done"] == 3 and d["failed"] == 3 and d["errors"] == {"bad input": 3}, d
assert [f["index"] for f in d["failures"]] == [1, 3, 4], d["failures"]
m = json.load(open(sys.argv[2]))
st = [(f["name"], f["status"], f.get("error", {}).get("status")) for f in m["files"]]
assert st == [("t0.npy", "done", None), ("t1.npy", "failed", "bad input"),
              ("t2.npy", "done", None), ("t3.npy", "failed", "bad input"),
              ("t4.npy", "failed", "bad input"), ("t5.npy", "done", None)], st
assert m["files"][1]["inputs"][0]["size"] == 300, m["files"][1]' "$out" \
      "$T/bi_out.manifest.json" || return 1
  for i in 0 2 5; do np check-seed "$T/bi_out/t$i.npy" "$d/t$i.npy" || return 1; done
  [[ $(ls "$T/bi_out") == $'t0.npy\nt2.npy\nt5.npy' ]]
}
check_reports_each_size_of_its_own() { # the least budget, not the input's size
  np make "$T/ck57.npy" 1000000 83 && run 2 check --graph "$examples/softmax.graph" \
    --input "$T/ck57.npy" --budget 4MiB && has "$out" "least 7.63 MiB" &&
    run 0 check --graph "$examples/seed.graph" --input "$T/ck57.npy" --budget 4MiB &&
    has "$out" "3.81 MiB in, 3.81 MiB out; backend host; budget 4.00 MiB, least 256 B"
}
check_reports_the_host_memory() { # what a run needs at once; refused as run refuses it
  np make "$T/ck57.npy" 1000000 83 &&
    run 0 check --graph "$examples/seed.graph" --input "$T/ck57.npy" --budget 4MiB --json &&
    "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
# One input and one output of 4,000,000 bytes after a 128-byte header, in 4 KiB blocks.
assert d["host_memory_least_bytes"] == 2 * 4001792, d' "$out" &&
    run 0 check --graph "$examples/seed.graph" --input "$T/ck57.npy" --budget 4MiB &&
    has "$out" "host memory: 7.63 MiB at once for the largest tensor, 7.63 MiB in all; the run streams within" &&
    run 2 check --graph "$examples/seed.graph" --input "$T/ck57.npy" --host-memory 4MiB &&
    has "$err" "tensor 0 ($T/ck57.npy) needs 7.63 MiB of host memory at once (its inputs and outputs, in whole blocks), more than --host-memory 4.00 MiB: give --host-memory 7.63 MiB or more" &&
    run 2 run --graph "$examples/seed.graph" --input "$T/ck57.npy" --output "$T/ck57_out.npy" \
      --host-memory 4MiB && has "$err" "more than --host-memory 4.00 MiB: give --host-memory 7.63 MiB or more" &&
    absent "$T/ck57_out.npy" && run 2 check --graph "$examples/seed.graph" \
      --input "$T/ck57.npy" --host-memory 1K && has "$err" "invalid value '1K' for --host-memory"
}
# Short of host memory under an address-space limit (prlimit --as): the runtime cannot reserve
# a budget larger than the limit (the host backend's budget is host memory), or the window
# cannot have even the largest tensor. Exit 3, saying what the run held and needs part by
# part, the limit, and what to do; nothing written.
run_short_of_memory_says_what_it_needs() {
  no_as_limit_under_sanitizers || return
  np make "$T/as.npy" 1000 84 && rm -f "$T/as_out.npy" &&
    run_as $((200 << 20)) 3 run --graph "$examples/seed.graph"       --input "$T/as.npy" --output "$T/as_out.npy" --budget 256MiB &&
    has "$err" "cannot start the runtime: out of host memory: host backend: cannot reserve 268435456 bytes for device 0's arena, with the window's 16.00 KiB held; this run needs up to " &&
    has "$err" "of memory: the window 16.00 KiB (within the default 50.00 MiB), the budget 256.00 MiB (host memory on the host backend), 3 workers' staging 192.01 MiB (64.00 MiB each); and up to " &&
    has "$err" "threads' stacks and malloc arenas" &&
    has "$err" "the address space is limited to 200.00 MiB (RLIMIT_AS): lower --budget, or raise the limit to " &&
    has "$err" "at the very least" && absent "$T/as_out.npy" || return 1
  # The window: not even the largest tensor's 16 MiB under a 16 MiB limit.
  np make "$T/as_big.npy" 2097152 85 && rm -f "$T/as_big_out.npy" &&
    run_as $((16 << 20)) 3 run --graph "$examples/seed.graph"       --input "$T/as_big.npy" --output "$T/as_big_out.npy" --budget 1MiB --host-memory 1GiB &&
    has "$err" "out of host memory: the system gave none of the 1.00 GiB of host memory (--host-memory), not even 16.01 MiB at once; the address space is limited to 16.00 MiB (RLIMIT_AS); this run needs at least that much (its largest tensor's inputs and outputs), and in all up to " &&
    has "$err" "the window 16.01 MiB (within --host-memory 1.00 GiB), the budget 1.00 MiB (host memory on the host backend)" &&
    has "$err" ": raise the limit to " && absent "$T/as_big_out.npy"
}
# check prints the host memory a run needs (the window, the budget on the host backend, the
# workers' staging, the threads' address space) in text and --json, and warns where it exceeds
# an address-space limit: that the run would fail when even the least exceeds it.
check_estimates_the_host_memory() {
  np make "$T/ce.npy" 1000000 86 &&
    run 0 check --graph "$examples/seed.graph" --input "$T/ce.npy" --budget 4MiB --workers 2 &&
    has "$out" "host memory estimate: up to 139.64 MiB of memory: the window 7.63 MiB (within the default " &&
    has "$out" "the budget 4.00 MiB (host memory on the host backend), 2 workers' staging 128.01 MiB (64.00 MiB each); and up to " &&
    has "$out" "; limits: RLIMIT_AS " && [[ ! -s $err ]] &&
    run 0 check --graph "$examples/seed.graph" --input "$T/ce.npy" --budget 4MiB --workers 2       --host-memory 64MiB --json && "$py" -c '
import json, sys
e = json.load(open(sys.argv[1]))["host_memory_estimate"]
assert e["window_bytes"] == 2 * 4001792 and e["budget_host_bytes"] == 4 << 20, e
assert e["workers"] == 2 and e["staging_bytes"] == 2 * ((64 << 20) + 4096), e
assert e["memory_bytes"] == e["window_bytes"] + e["budget_host_bytes"] + e["staging_bytes"], e
assert e["address_space_bytes"] == (e["memory_bytes"] + e["threads_address_bytes"] +
                                    e["program_bytes"]), e
assert e["threads"] >= 2 and e["threads_address_bytes"] > 0 and e["warning"] is None, e' "$out" ||
    return 1
  no_as_limit_under_sanitizers || return
  run_as $((400 << 20)) 0 check --graph "$examples/seed.graph"     --input "$T/ce.npy" --budget 256MiB &&
    has "$out" "limits: RLIMIT_AS 400.00 MiB" &&
    has "$err" "graphrun check: warning: the run may reserve up to " &&
    has "$err" "more than the address-space limit, RLIMIT_AS 400.00 MiB, and then fail to start: lower --budget or --workers (each worker holds 64.00 MiB of staging and reserves " &&
    has "$err" "or raise the limit to " &&
    run_as $((200 << 20)) 0 check --graph "$examples/seed.graph"       --input "$T/ce.npy" --budget 256MiB --json &&
    has "$err" "(run would fail for want of memory, exit 3)" && "$py" -c '
import json, sys
e = json.load(open(sys.argv[1]))["host_memory_estimate"]
assert e["address_space_limit_bytes"] == 200 << 20, e
assert e["warning"].startswith("the run needs at least "), e
assert "more than the address-space limit, RLIMIT_AS 200.00 MiB: lower --budget, or raise" in e["warning"], e' "$out"
}
check_refuses_a_kernel_run_refuses() { # no CPU version on the host backend: refused by both
  if ! ldconfig -p | grep -q libnvrtc.so.13 && [[ ! -e ${CUDA_PATH:-/usr/local/cuda}/lib64/libnvrtc.so.13 ]]; then
    echo "    (no NVRTC on this machine: the spec does not load, for check as for run)"
    run 2 check --graph "$examples/user_kernel.graph" --input "$T/u.npy" && has "$err" "NVRTC"
    return
  fi
  run 2 check --graph "$examples/user_kernel.graph" --input "$T/u.npy" --json && "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "refused" and d["exit"] == 2, d
assert "node '"'"'sq'"'"': kernel '"'"'scaled_square'"'"' has no CPU implementation, which the host backend needs" in d["error"], d' \
    "$out" && run 2 run --graph "$examples/user_kernel.graph" --input "$T/u.npy" \
      --output "$T/uk2.npy" && has "$err" "kernel 'scaled_square' has no CPU implementation" &&
    absent "$T/uk2.npy"
}
reported_time_is_the_whole_run() { # from the command's start: reading stdin counts too
  (sleep 1.5; cat "$T/a.npy") | "$bin" run --graph "$examples/seed.graph" --input - \
    --output "$T/rt_out.npy" --json --force >"$out" 2>"$err" && "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["seconds"] >= 1.0 and d["setup_seconds"] >= 1.0, d
assert abs(d["seconds"] - d["setup_seconds"] - d["stream_seconds"]) < 1e-3, d
assert 0 < d["runtime_start_seconds"] < d["setup_seconds"] and d["teardown_seconds"] > 0, d' "$out" &&
    np check-seed "$T/rt_out.npy" "$T/a.npy"
}
info_ceilings_without_cuda_warns() { # the host backend has no link to measure: said so
  if "$bin" info --json 2>/dev/null | grep -q '"cuda_available":true'; then
    echo "    (CUDA is here: --ceilings measures)"
    return
  fi
  run 0 info --ceilings && has "$err" "warning: --ceilings does not apply: it measures CUDA's copies, and CUDA is not available here" &&
    run 0 info --ceilings --json && "$py" -c '
import json, sys
assert json.load(open(sys.argv[1]))["ceilings_not_measured"]' "$out"
}
# Constants (--const NAME=FILE): a spec's `const` lines given from files, read once and given
# to every job of a streaming run; NumPy computes what normalize should give.
const_spec() { # the spec, and the constants' files: mean (.npy, big-endian), sd (raw)
  mkdir -p "$T/cst" && printf '%s\n' 'const mean [3]' 'const sd float32 [1, 3]' 'buffer x' \
    'buffer y' 'h2d l: in0 -> x' 'kernel k: normalize(x, mean, sd) -> y' 'd2h s: y -> out0' \
    >"$T/cst/norm.graph" && "$py" -c '
import numpy as np, sys
d = sys.argv[1]
np.save(d + "/mean.npy", np.array([0.5, -2, 3], ">f4"))
np.array([2, 0.25, 8], "<f4").tofile(d + "/sd.raw")
np.save(d + "/mean64.npy", np.array([0.5, -2, 3], "<f8"))
np.save(d + "/mean4.npy", np.zeros((2, 2), "<f4"))
np.save(d + "/sd13.npy", np.array([[2, 0.25, 8]], "<f4"))
open(d + "/short.npy", "wb").write(open(d + "/sd13.npy", "rb").read()[:-4])' "$T/cst"
}
check_normalized() { # OUT_DIR IN_DIR: every output == (x - mean) / sd, per channel of 3
  "$py" -c '
import numpy as np, os, sys
out, inp, d = sys.argv[1:4]
m = np.load(d + "/mean.npy").astype("<f4")
s = np.fromfile(d + "/sd.raw", "<f4")
names = sorted(f for f in os.listdir(inp) if f.endswith(".npy"))
assert sorted(os.listdir(out)) == names, (os.listdir(out), names)
for n in names:
    x, y = np.load(inp + "/" + n), np.load(out + "/" + n)
    want = ((x.reshape(-1, 3) - m) / s).reshape(x.shape)
    assert y.dtype == np.float32 and y.shape == x.shape, (n, y.dtype, y.shape)
    assert np.array_equal(y, want), (n, abs(y - want).max())' "$1" "$2" "$T/cst"
}
constants_given_to_every_tensor() { # a directory streamed in several jobs; check; --resume
  local i
  const_spec && mkdir -p "$T/cst/in" || return 1
  for i in 0 1 2 3 4 5; do np make "$T/cst/in/t$i.npy" "$((60000 + 3 * i)),3" "$((30 + i))" || return 1; done
  # A window of two tensors: the tensors go in several jobs, each given the constants.
  run 0 check --graph "$T/cst/norm.graph" --input "$T/cst/in" --const sd="$T/cst/sd.raw" \
    --const mean="$T/cst/mean.npy" --host-memory 2MiB &&
    has "$out" "constant mean: float32 [3], 12 bytes, from $T/cst/mean.npy (.npy)" &&
    has "$out" "constant sd: float32 [1, 3], 12 bytes, from $T/cst/sd.raw (raw)" &&
    run 0 run --graph "$T/cst/norm.graph" --input "$T/cst/in" --output "$T/cst/out" \
      --const mean="$T/cst/mean.npy" --const sd="$T/cst/sd.raw" --host-memory 2MiB &&
    has "$out" "ok: 6 of 6 tensors done" && check_normalized "$T/cst/out" "$T/cst/in" &&
    run 0 run --graph "$T/cst/norm.graph" --input "$T/cst/in" --output "$T/cst/out" \
      --const mean="$T/cst/mean.npy" --const sd="$T/cst/sd.raw" --resume &&
    has "$out" "ok: 6 of 6 tensors done (6 by an earlier run)" || return 1
  # Other constants make every output stale: --resume refuses, naming them.
  run 2 run --graph "$T/cst/norm.graph" --input "$T/cst/in" --output "$T/cst/out" \
    --const mean="$T/cst/mean.npy" --const sd="$T/cst/sd13.npy" --resume &&
    has "$err" "--resume: the constants (--const: their names or files) changed since the run" &&
    touch -d '1 hour ago' "$T/cst/sd.raw" &&
    run 2 run --graph "$T/cst/norm.graph" --input "$T/cst/in" --output "$T/cst/out" \
      --const mean="$T/cst/mean.npy" --const sd="$T/cst/sd.raw" --resume &&
    has "$err" "the constants (--const: their names or files) changed since" || return 1
  # The default budget holds the constants beside three iterations of the largest tensor.
  printf '%s\n' 'const mean [65536]' 'const sd [1]' 'buffer x' 'h2d l: in0 -> x' \
    'kernel k: normalize(x, mean, sd) -> x' 'd2h s: x -> out0' >"$T/cst/wide.graph" &&
    "$py" -c '
import numpy as np, sys
np.save(sys.argv[1] + "/wide.npy", np.arange(65536, dtype="<f4"))
np.save(sys.argv[1] + "/one.npy", np.array([4], "<f4"))' "$T/cst" &&
    np make "$T/cst/x.npy" 5,7 40 &&
    run 0 run --graph "$T/cst/wide.graph" --input "$T/cst/x.npy" --output "$T/cst/w.npy" \
      --const mean="$T/cst/wide.npy" --const sd="$T/cst/one.npy" && "$py" -c '
import numpy as np, sys
x, y = np.load(sys.argv[1]), np.load(sys.argv[2])
want = ((x.ravel() - np.arange(35, dtype="<f4")) / np.float32(4)).reshape(x.shape)
assert np.array_equal(y, want), abs(y - want).max()' "$T/cst/x.npy" "$T/cst/w.npy"
}
constants_refused_clearly() { # each mistake named, exit 2, nothing created; check says the same
  local c g=$T/cst/norm.graph m=$T/cst/mean.npy s=$T/cst/sd.raw
  const_spec && np make "$T/cst/x.npy" 4,3 41 || return 1
  cr() { # EXPECTED_MESSAGE CONST_ARGS...: refused by run and by check, run creating nothing
    local want=$1
    shift
    run 2 run --graph "$g" --input "$T/cst/x.npy" --output "$T/cst/bad.npy" "$@" &&
      has "$err" "$want" && absent "$T/cst/bad.npy" &&
      run 2 check --graph "$g" --input "$T/cst/x.npy" "$@" && has "$err" "$want"
  }
  cr "$g declares constant 'mean' (float32 [3]) but no --const mean=FILE gives it (a .npy or raw file of 3 float32 elements)" &&
    cr "$g declares constant 'sd' (float32 [1, 3]) but no --const sd=FILE gives it" --const mean="$m" &&
    cr "--const W=$m: $g has no constant 'W' (it declares mean, sd)" --const mean="$m" --const sd="$s" --const W="$m" &&
    cr "--const mean given twice ($m and $s): give each constant once" --const mean="$m" --const mean="$s" &&
    cr "invalid value 'mean' for --const (want NAME=FILE" --const mean &&
    cr "invalid value '=x' for --const (want NAME=FILE" --const =x &&
    cr "--const mean=$T/cst/mean64.npy: the file holds float64 ('<f8') but $g declares mean float32 [3]: convert with a.astype(np.float32)" \
      --const mean="$T/cst/mean64.npy" --const sd="$s" &&
    cr "--const mean=$T/cst/mean4.npy: the file holds 4 elements (shape (2, 2)) but $g declares mean float32 [3], 3 elements" \
      --const mean="$T/cst/mean4.npy" --const sd="$s" &&
    cr "--const sd=$m.raw: cannot open: No such file or directory" --const mean="$m" --const sd="$m.raw" &&
    cr "--const sd=$T/cst/short.npy: the header says 12 bytes of float32 data after a" \
      --const mean="$m" --const sd="$T/cst/short.npy" &&
    g=$examples/seed.graph cr "--const W=$m: $examples/seed.graph has no constant 'W' (it declares none)" \
      --const W="$m" || return 1
  # Raw of the wrong size; and with --json one object, the message as on stderr.
  head -c 8 "$s" >"$T/cst/sd8.raw" &&
    cr "--const sd=$T/cst/sd8.raw: $g declares sd float32 [1, 3], 12 bytes of raw data, but the file has 8 bytes" \
      --const mean="$m" --const sd="$T/cst/sd8.raw" &&
    run 2 run --graph "$g" --input "$T/cst/x.npy" --output "$T/cst/bad.npy" --json \
      --const mean="$m" --const mean="$m" && "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "refused" and d["exit"] == 2, d
assert d["error"].startswith("--const mean given twice"), d' "$out" && absent "$T/cst/bad.npy"
}
help_says_the_defaults() { # the budget's and the host memory's
  run 0 run --help && has "$out" "Budget: --budget (per device), else room for three iterations of the largest" &&
    has "$out" "host memory for the tensors being read, run and written: a" &&
    has "$out" "machine's memory, at most 2GiB, and at most a quarter of" &&
    has "$out" "--sync WHEN      each (the default)" && run 0 check --help &&
    has "$out" "--host-memory SIZE" && run 2 run --graph "$examples/seed.graph" \
      --input "$T/a.npy" --output "$T/hs.npy" --sync sometimes &&
    has "$err" "invalid value 'sometimes' for --sync (each, end or none)" &&
    run 2 run --graph "$examples/seed.graph" --input "$T/a.npy" --output "$T/hs.npy" \
      --io mmap && has "$err" "invalid value 'mmap' for --io (auto, io_uring or pread)" &&
    run 2 check --graph "$examples/seed.graph" --input "$T/a.npy" --sync=end &&
    has "$err" "--sync=end is a flag of graphrun run" && absent "$T/hs.npy"
}
bench_io_checks_its_outputs() { # the disk measured, the run against it, every output checked
  rm -rf "$T/bio" && mkdir -p "$T/bio" &&
    run 0 bench --io "$T/bio" --count 4 --elems 262144 --host-memory 4MiB --json && "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["verified"] == 4 and d["wrong"] == 0 and d["run_exit"] == 0, d
assert d["disk_read_gbs"] > 0 and d["disk_write_gbs"] > 0 and d["disk_both_gbs"] > 0, d
assert d["ratio"] > 0 and d["peak_rss_bytes"] > 0 and d["run"]["status"] == "ok", d
assert d["peak_rss_bytes"] == d["run"]["peak_rss_bytes"], d  # the run itself says
assert d["run"]["host_memory_bytes"] == 4 << 20, d["run"]
assert d["dataset_seconds"] > 0 and d["check_seconds"] > 0, d' "$out" &&
    [[ -z $(ls -A "$T/bio") ]] || { echo "    left:"; ls -A "$T/bio"; return 1; }
  # The check finds a wrong element wherever it lies in its tensor: it runs in pieces of
  # 2^20 elements on every CPU, and here the element is in the second piece of output 1,
  # then the last element of output 0 (GR_TEST_BENCH_WRONG flips one bit as it reads it).
  local at
  for at in 1:1048577 0:1100000; do
    GR_TEST_BENCH_WRONG=$at run 1 bench --io "$T/bio" --count 2 --elems 1100001 --json &&
      "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["verified"] == 1 and d["wrong"] == 1 and d["run_exit"] == 0, d' "$out" || return 1
  done
  # A run that gets a tensor wrong (here: fails it) fails the benchmark. The failed device
  # allocation fails the unit it was for, and how many tensors a unit holds depends on how
  # the stream grouped them as they arrived: one to three of the four.
  GR_FAULT=arena:2 run 1 bench --io "$T/bio" --count 4 --elems 262144 --json && "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["verified"] + d["wrong"] == 4 and d["wrong"] >= 1 and d["verified"] >= 1, d
assert d["run_exit"] == 1, d' "$out"
}
peak_rss_is_the_runs_own() { # started by a process holding 768 MiB, a small run says less
  # Linux starts a child's ru_maxrss at its parent's peak (kept across exec): a run started
  # by a bench or Python would report that process's memory as its own.
  np make "$T/rss_in.npy" 1000 1 &&
    "$py" - "$bin" "$examples/seed.graph" "$T/rss_in.npy" "$T/rss_out.npy" <<'PY'
import json, subprocess, sys
held = bytearray(768 << 20)
for i in range(0, len(held), 4096):
    held[i] = 1
p = subprocess.run([sys.argv[1], "run", "--graph", sys.argv[2], "--input", sys.argv[3],
                    "--output", sys.argv[4], "--json"], capture_output=True, text=True)
assert p.returncode == 0, p.stderr
d = json.loads(p.stdout)
assert 0 < d["peak_rss_bytes"] < 512 << 20, d["peak_rss_bytes"]
PY
}
bench_io_cleans_up_when_stopped() { # a signal half way removes what the bench wrote
  local dir="$T/bio_stop" phase pid rc k
  for phase in in out; do # stopped writing its dataset; stopped while the run writes
    rm -rf "$dir" # DIR need not exist: the bench makes it, and leaves it, empty
    "$bin" bench --io "$dir" --count 16 --elems 4194304 --host-memory 64MiB --json \
      >"$out" 2>"$err" &
    pid=$!
    for ((k = 0; k < 600; k++)); do
      compgen -G "$dir/graphrun-bench-io.*/$phase/*" >/dev/null && break
      sleep 0.05
    done
    kill -TERM "$pid"
    wait "$pid"
    rc=$?
    ((rc == 143)) || { echo "    stopped in '$phase': exit $rc, expected 143"; cat "$err"; return 1; }
    [[ -d $dir && -z $(ls -A "$dir") ]] ||
      { echo "    left after a stop in '$phase':"; ls -R "$dir" | head; return 1; }
    has "$err" "graphrun bench: stopped by Terminated; $dir/graphrun-bench-io." || return 1
    ! grep -qaF "$dir/graphrun-bench-io" /proc/[0-9]*/cmdline 2>/dev/null ||
      { echo "    a graphrun run of the bench outlived it"; return 1; }
  done
}
progress_line_only_where_it_belongs() { # on a terminal or asked for; never with --json
  local lines="$T/pg_lines"
  # The line is redrawn in place ('\r'): one line per drawing, to read it.
  rm -rf "$T/pg_out" "$T/pg_out.manifest.json" &&
    run 0 run --graph "$examples/seed.graph" --input "$T/in_dir" --output "$T/pg_out" \
      --progress always && tr '\r' '\n' <"$err" >"$lines" &&
    has "$lines" "5/5 tensors | disk read " && has "$lines" "| link " &&
    has "$lines" "| host " && has "$lines" " ETA " &&
    rm -rf "$T/pg_out" "$T/pg_out.manifest.json" &&
    run 0 run --graph "$examples/seed.graph" --input "$T/in_dir" --output "$T/pg_out" &&
    ! grep -q "tensors" "$err" && rm -rf "$T/pg_out" "$T/pg_out.manifest.json" &&
    run 0 run --graph "$examples/seed.graph" --input "$T/in_dir" --output "$T/pg_out" --json &&
    [[ ! -s $err ]] || { tr '\r' '\n' <"$err" | sed 's/^/    | /'; return 1; }
}

an_output_over_an_input_is_refused() { # the same file by any spelling, nothing touched
  local d="$T/over" sums
  rm -rf "$d" && mkdir -p "$d/in" && cp "$T/in_dir"/t{1,2,3}.npy "$d/in/" &&
    ln -s in "$d/link" && printf '%s\n' "$d/in/t1.npy" "$d/in/t2.npy" >"$d/in.txt" &&
    printf '%s\n' "$d/o1.npy" "$d/link/t1.npy" >"$d/out.txt" &&
    sums=$(cat "$d"/in/* | md5sum) || return 1
  run 2 run --graph "$examples/seed.graph" --input "$d/in" --output "$d/in" --force &&
    has "$err" "--output: $d/in/t1.npy (tensor 0, output 0) is the file of input 0 of tensor 0 ($d/in/t1.npy)" &&
    has "$err" "write the outputs to other files" &&
    run 2 run --graph "$examples/seed.graph" --input "$d/in/t2.npy" --output "$d/./in/t2.npy" \
      --force && has "$err" "is the file of input 0 of tensor 0" &&
    run 2 run --graph "$examples/seed.graph" --input "$d/in" --output "$d/link" --force \
      --keep-going && has "$err" "is the file of input 0 of tensor 0" &&
    run 2 check --graph "$examples/seed.graph" --input "$d/in" --output "$d/link" --force &&
    has "$err" "is the file of input 0 of tensor 0" || return 1
  # Tensor 1's output is tensor 0's input: the run would replace it before reading it.
  run 2 run --graph "$examples/seed.graph" --input "@$d/in.txt" --output "@$d/out.txt" \
    --force && has "$err" "--output: $d/link/t1.npy (tensor 1, output 0) is the file of input 0 of tensor 0" &&
    [[ $(cat "$d"/in/* | md5sum) == "$sums" ]] || { echo "    an input changed"; return 1; }
  [[ $(ls -A "$d" | tr '\n' ' ') == "in in.txt link out.txt " ]] ||
    { echo "    left: $(ls -A "$d")"; return 1; }
}
outputs_compared_as_files() { # not as strings: ./d.npy is d.npy, sub/../e.npy is e.npy
  local d="$T/dup" left
  rm -rf "$d" && mkdir -p "$d/sub" && printf '%s\n' "$T/in_dir"/t{1,2,3,4}.npy >"$d/in.txt" &&
    printf '%s\n' d.npy ./d.npy sub/../e.npy e.npy >"$d/out.txt" &&
    printf '%s\n' d.npy f.npy sub/../e.npy e.npy >"$d/out2.txt" || return 1
  run 2 run --graph "$examples/seed.graph" --input "@$d/in.txt" --output "@$d/out.txt" &&
    has "$err" "--output: $d/d.npy (tensor 0, output 0) and $d/./d.npy (tensor 1, output 0) are the same file" &&
    run 2 run --graph "$examples/seed.graph" --input "@$d/in.txt" --output "@$d/out2.txt" &&
    has "$err" "$d/sub/../e.npy (tensor 2, output 0) and $d/e.npy (tensor 3, output 0) are the same file" &&
    run 2 check --graph "$examples/seed.graph" --input "@$d/in.txt" --output "@$d/out2.txt" &&
    has "$err" "are the same file" || return 1
  # Two ports, one file; the manifest one of the outputs.
  run 2 run --graph "$examples/dag.graph" --input "$T/da.npy" --input "$T/db.npy" \
    --output "$d/x.npy" --output "$d/sub/../x.npy" && has "$err" "are the same file" &&
    run 2 run --graph "$examples/seed.graph" --input "$T/a.npy" --output "$d/m.npy" \
      --manifest "$d/./m.npy" &&
    has "$err" "--manifest $d/./m.npy is also an output ($d/m.npy)" &&
    mkdir "$d/o" && run 2 run --graph "$examples/seed.graph" --input "$T/in_dir" \
      --output "$d/o" --manifest "$d/o/t3.npy" &&
    has "$err" "--manifest $d/o/t3.npy is also an output" || return 1
  left="$(ls -A "$d" | tr '\n' ' ')$(ls -A "$d/sub")$(ls -A "$d/o")"
  [[ $left == "in.txt o out.txt out2.txt sub " ]] ||
    { echo "    left: $left"; return 1; }
}
case_ npy_round_trip npy_round_trip
case_ npy_shapes npy_shapes
case_ raw_files raw_files
case_ directories directories
case_ two_inputs_two_outputs two_inputs_two_outputs
case_ outputs_compared_as_files outputs_compared_as_files
case_ an_output_over_an_input_is_refused an_output_over_an_input_is_refused
case_ unfused_graph_equals_fused unfused_graph_equals_fused
softmax_rows_of_npy_shapes() { # the rows come from the file's shape
  local s
  for s in 7,33 2,3,5 1000 1; do
    np make "$T/sm.npy" "$s" 8 && run 0 run --graph "$examples/softmax.graph" \
      --input "$T/sm.npy" --output "$T/sm_out.npy" --force &&
      np check-softmax "$T/sm_out.npy" "$T/sm.npy" || return 1
  done
}
sum_to_one_element_outputs() { # a fixed-size output port: one float per tensor
  mkdir -p "$T/sum_in"
  local i
  for i in 1 2 3; do np make "$T/sum_in/t$i.npy" "$((i * 1001))" "$((20 + i))" || return 1; done
  run 0 run --graph "$examples/sum.graph" --input "$T/sum_in" --output "$T/sum_out" || return 1
  for i in 1 2 3; do np check-sum "$T/sum_out/t$i.npy" "$T/sum_in/t$i.npy" || return 1; done
}
cuda_source_kernels_refused_on_host() { # NVRTC compiles them here; the host cannot run them
  if ! ldconfig -p | grep -q libnvrtc.so.13 && [[ ! -e ${CUDA_PATH:-/usr/local/cuda}/lib64/libnvrtc.so.13 ]]; then
    echo "    (no NVRTC on this machine: the refusal names it instead)"
    run 2 run --graph "$examples/user_kernel.graph" --input "$T/u.npy" --output "$T/uk.npy" &&
      has "$err" "NVRTC" && absent "$T/uk.npy"
    return
  fi
  run 2 run --graph "$examples/user_kernel.graph" --input "$T/u.npy" --output "$T/uk.npy" &&
    has "$err" "node 'sq': kernel 'scaled_square' has no CPU implementation, which the host backend needs" &&
    absent "$T/uk.npy" || return 1
  printf '// graphrun: kernel broken\nextern "C" __global__ void broken(gr_kernel_args a) { oops; }\n' >"$T/broken.cu"
  run 2 run --kernels "$T/broken.cu" --graph "$examples/seed.graph" --input "$T/u.npy" \
    --output "$T/uk.npy" && has "$err" "--kernels: NVRTC: " && has "$err" "broken.cu(2): error" &&
    absent "$T/uk.npy"
}

# Element types. Each graph of tests/graphs/ on inputs NumPy wrote, in both byte orders:
# the output must be byte for byte what np.save writes for NumPy's own result.
typed() { # GRAPH CHECK... : make was done; run GRAPH on $T/t.npy, then npy_tool CHECK
  local graph=$1
  shift
  run 0 run --graph "$graphs/$graph" --input "$T/t.npy" --output "$T/t_out.npy" --force &&
    np "$@"
}
both_orders() { # GRAPH SHAPE MAKE_ARGS -- CHECK...: little-endian, then big-endian input
  local graph=$1 shape=$2 make=() order
  shift 2
  while [[ $1 != -- ]]; do make+=("$1"); shift; done
  shift
  for order in "" --big-endian; do
    np make "$T/t.npy" "$shape" 31 "${make[@]}" $order &&
      typed "$graph" "${@/#OUT/$T/t_out.npy}" || { echo "    (input ${order:-little-endian})"; return 1; }
  done
}
float16_npy() {
  local s
  for s in 5,7 1021 ""; do
    both_orders f16_mul.graph "$s" --dtype f2 --range -6,6 -- check-mul OUT "$T/t.npy" 0.3 ||
      return 1
  done
}
bfloat16_npy() {
  bf16 || return
  both_orders bf16_mul.graph 3,4,5 --dtype bf16 --range -6,6 -- check-mul OUT "$T/t.npy" 0.3 &&
    both_orders bf16_mul.graph 1000 --dtype bf16 --range -1e6,1e6 -- \
      check-mul OUT "$T/t.npy" 0.3 || return 1
  # np.load of a bfloat16 file gives raw '|V2' bytes; saved again they stay little-endian.
  np make "$T/bf.npy" 9 32 --dtype bf16 --range -6,6 && "$py" -c '
import numpy as np, sys
np.save(sys.argv[2], np.load(sys.argv[1]))
assert open(sys.argv[2], "rb").read().find(b"|V2") > 0' "$T/bf.npy" "$T/t.npy" &&
    typed bf16_mul.graph check-mul "$T/t_out.npy" "$T/bf.npy" 0.3 || return 1
  # Raw bfloat16 (the bits, as ml_dtypes' tofile writes them): the port's type, --dtype or not.
  np make "$T/bf.raw" 64 34 --dtype bf16 --range -6,6 --raw &&
    run 0 run --graph "$graphs/bf16_mul.graph" --input "$T/bf.raw" --output "$T/bf_out.raw" &&
    run 0 run --graph "$graphs/bf16_mul.graph" --input "$T/bf.raw" --dtype bfloat16 \
      --output "$T/bf_out2.raw" && cmp "$T/bf_out.raw" "$T/bf_out2.raw" && "$py" -c '
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np, npy_tool
x = np.fromfile(sys.argv[2], npy_tool.BF16)
want = npy_tool.mul(x, 0.3).tobytes()
assert open(sys.argv[3], "rb").read() == want, "raw bfloat16 result differs"' \
      "$(dirname "$tool")" "$T/bf.raw" "$T/bf_out.raw"
}
float64_npy() {
  both_orders f64_mul.graph 6,50 --dtype f8 --range -1e300,1e300 -- \
    check-mul OUT "$T/t.npy" 0.3 &&
    both_orders f64_mul.graph 77 --dtype f8 --range -1,1 -- check-mul OUT "$T/t.npy" 0.3
}
int32_to_float64() {
  both_orders i32_to_f64.graph 4,257 --dtype i4 -- check-cast OUT "$T/t.npy" float64
}
uint8_to_float32() {
  both_orders u8_to_f32.graph 2,3,64 --dtype u1 -- check-cast OUT "$T/t.npy" float32 0.5 &&
    run 0 run --graph "$graphs/u8_to_f32.graph" --input "$T/t.npy" --output "$T/u8.npy" --json &&
    "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))  # 384 uint8 elements in, 384 float32 out
assert d["bytes_in"] == 384 and d["bytes_out"] == 384 * 4, d' "$out" || return 1
  # Raw uint8: read as the port's type, with or without --dtype saying so.
  np make "$T/u8.raw" 100 33 --dtype u1 --raw && "$py" -c '
import numpy as np, sys
np.save(sys.argv[2], np.fromfile(sys.argv[1], np.uint8).reshape(4, 25))' "$T/u8.raw" "$T/u8r.npy" &&
    run 0 run --graph "$graphs/u8_to_f32.graph" --input "$T/u8.raw" --output "$T/u8r_out.raw" &&
    run 0 run --graph "$graphs/u8_to_f32.graph" --input "$T/u8.raw" --dtype uint8 --shape 4,25 \
      --output "$T/u8r_out.npy" && np check-cast "$T/u8r_out.npy" "$T/u8r.npy" float32 0.5 &&
    "$py" -c '
import numpy as np, sys
got, want = np.fromfile(sys.argv[1], np.float32), np.load(sys.argv[2]).ravel()
assert got.tobytes() == want.tobytes(), (got[:4], want[:4])' "$T/u8r_out.raw" "$T/u8r_out.npy"
}
typed_outputs() { # the output's own type: uint8, float16, int32 (NaN, inf, the ends)
  both_orders f32_to_u8.graph 300 --special --range -300,300 -- \
    check-cast OUT "$T/t.npy" uint8 &&
    both_orders f32_to_f16.graph 300 --special --range -7e4,7e4 -- \
      check-cast OUT "$T/t.npy" float16 &&
    both_orders f64_to_i32.graph 3,100 --dtype f8 --special --range -3e9,3e9 -- \
      check-cast OUT "$T/t.npy" int32
}
bfloat16_output() { # written as '<V2', what np.save writes for ml_dtypes.bfloat16
  bf16 || return
  both_orders f32_to_bf16.graph 300 --special --range -1e38,1e38 -- \
    check-cast OUT "$T/t.npy" bfloat16
}
two_input_types() { # in0 uint8, in1 float32, in directories; one big-endian weight file
  mkdir -p "$T/ta" "$T/tb"
  local i
  for i in 1 2 3; do
    np make "$T/ta/t$i.npy" 4,$((i * 10)) $((40 + i)) --dtype u1 &&
      np make "$T/tb/t$i.npy" 4,$((i * 10)) $((50 + i)) --range -2,2 \
        $([[ $i == 2 ]] && echo --big-endian) || return 1
  done
  run 0 run --graph "$graphs/u8_times_f32.graph" --input "$T/ta" --input "$T/tb" \
    --output "$T/tab" || return 1
  for i in 1 2 3; do
    np check-mixed "$T/tab/t$i.npy" "$T/ta/t$i.npy" "$T/tb/t$i.npy" || return 1
  done
}
refuses_other_types() { # before the run, with the file, the port, both types, the fix
  np make "$T/f4.npy" 10 60 && run 2 run --graph "$graphs/u8_to_f32.graph" \
    --input "$T/f4.npy" --output "$T/x_out.npy" &&
    has "$err" "graphrun run: $T/f4.npy holds float32 but the graph's in0 is uint8: convert with a.astype(np.uint8) or change the spec's buffer type" &&
    absent "$T/x_out.npy" && np make "$T/u1.npy" 10 61 --dtype u1 &&
    run 2 run --graph "$graphs/f16_mul.graph" --input "$T/u1.npy" --output "$T/x_out.npy" &&
    has "$err" "u1.npy holds uint8 but the graph's in0 is float16: convert with a.astype(np.float16)" &&
    absent "$T/x_out.npy" && np make "$T/f8be.npy" 10 62 --dtype f8 --big-endian &&
    run 2 run --graph "$graphs/bf16_mul.graph" --input "$T/f8be.npy" --output "$T/x_out.npy" &&
    has "$err" "f8be.npy holds float64 but the graph's in0 is bfloat16: convert with a.astype(ml_dtypes.bfloat16)" &&
    absent "$T/x_out.npy" || return 1
  # Two-byte raw values ('V2') are bfloat16 for a bfloat16 port only; uint16 never is.
  "$py" -c 'import numpy as np, sys; np.save(sys.argv[1], np.zeros(4, "V2"))' "$T/v2.npy" &&
    run 2 run --graph "$graphs/f16_mul.graph" --input "$T/v2.npy" --output "$T/x_out.npy" &&
    has "$err" "v2.npy holds 2-byte raw values ('|V2': what np.save writes for ml_dtypes.bfloat16, read only as bfloat16) but the graph's in0 is float16: convert with a.view(ml_dtypes.bfloat16).astype(np.float16)" &&
    absent "$T/x_out.npy" && np make "$T/u2.npy" 4 63 --dtype u2 &&
    run 2 run --graph "$graphs/bf16_mul.graph" --input "$T/u2.npy" --output "$T/x_out.npy" &&
    has "$err" "u2.npy: dtype '<u2' (uint16) is not supported" &&
    has "$err" "(bfloat16 bit patterns held as uint16: save a.view(ml_dtypes.bfloat16))" &&
    absent "$T/x_out.npy" || return 1
  # Raw files: --dtype must be the port's; with two ports of two types it names the other.
  run 2 run --graph "$graphs/u8_to_f32.graph" --input "$T/u8.raw" --dtype float32 \
    --output "$T/x_out.raw" &&
    has "$err" "u8.raw: --dtype float32, but the graph's in0 is uint8: a raw file holds its port's type" &&
    absent "$T/x_out.raw" && run 2 run --graph "$graphs/u8_to_f32.graph" --input "$T/u8.raw" \
    --dtype uint16 --output "$T/x_out.raw" &&
    has "$err" "--dtype uint16 is not a type: graphrun reads float32, float16, bfloat16, float64, int32 and uint8" &&
    absent "$T/x_out.raw" && np make "$T/w.raw" 100 64 --raw &&
    run 2 run --graph "$graphs/u8_times_f32.graph" --input "$T/u8.raw" --input "$T/w.raw" \
      --dtype uint8 --output "$T/x_out.raw" &&
    has "$err" "w.raw: --dtype uint8, but the graph's in1 is float32" && absent "$T/x_out.raw" &&
    run 0 run --graph "$graphs/u8_times_f32.graph" --input "$T/u8.raw" --input "$T/w.raw" \
      --output "$T/x_out.raw" || return 1
  # One file of another type in a directory: nothing at all is written.
  mkdir -p "$T/mixed_in" && cp "$T/ta/t1.npy" "$T/ta/t2.npy" "$T/mixed_in/" &&
    cp "$T/f4.npy" "$T/mixed_in/t3.npy" &&
    run 2 run --graph "$graphs/u8_to_f32.graph" --input "$T/mixed_in" --output "$T/mixed_out" &&
    has "$err" "mixed_in/t3.npy holds float32 but the graph's in0 is uint8" &&
    [[ -z $(ls -A "$T/mixed_out" 2>/dev/null) ]]
}

case_ json_summary json_summary
case_ environment_defaults environment_defaults
case_ sizes_and_usage_mistakes sizes_and_usage_mistakes
case_ bench_flags_refused_before_any_device bench_flags_refused_before_any_device
case_ outputs_honour_the_umask outputs_honour_the_umask
case_ device_list_flags device_list_flags
case_ manifest_of_one_process manifest_of_one_process
case_ refuses_bad_header refuses_bad_header
case_ refuses_wrong_dtype refuses_wrong_dtype
case_ refuses_fortran_order refuses_fortran_order
case_ refuses_shape_mismatch refuses_shape_mismatch
case_ refuses_missing_file refuses_missing_file
case_ refuses_unwritable_output refuses_unwritable_output
case_ refuses_bad_spec_with_line_and_column refuses_bad_spec_with_line_and_column
case_ refuses_port_count_mismatch refuses_port_count_mismatch
case_ existing_output_needs_force existing_output_needs_force
case_ long_output_name long_output_name
case_ interrupted_run_keeps_what_is_done_and_resumes interrupted_run_keeps_what_is_done_and_resumes
case_ failing_tensor_stops_the_run failing_tensor_stops_the_run
case_ keep_going_past_a_failing_tensor keep_going_past_a_failing_tensor
case_ first_error_is_the_failure_not_a_cancel first_error_is_the_failure_not_a_cancel
case_ full_disk_is_said_as_such full_disk_is_said_as_such
case_ all_or_nothing_keeps_the_old_way all_or_nothing_keeps_the_old_way
case_ sigkill_leaves_no_partial_output sigkill_leaves_no_partial_output
case_ resume_refuses_a_changed_graph resume_refuses_a_changed_graph
case_ resume_refuses_other_flags resume_refuses_other_flags
case_ resume_matches_by_input_paths resume_matches_by_input_paths
case_ refusals_in_json_create_nothing refusals_in_json_create_nothing
case_ usage_mistakes_in_runs_terms usage_mistakes_in_runs_terms
case_ softmax_rows_of_npy_shapes softmax_rows_of_npy_shapes
case_ sum_to_one_element_outputs sum_to_one_element_outputs
case_ cuda_source_kernels_refused_on_host cuda_source_kernels_refused_on_host
case_ float16_npy float16_npy
case_ bfloat16_npy bfloat16_npy
case_ float64_npy float64_npy
case_ int32_to_float64 int32_to_float64
case_ uint8_to_float32 uint8_to_float32
case_ typed_outputs typed_outputs
case_ bfloat16_output bfloat16_output
case_ two_input_types two_input_types
case_ refuses_other_types refuses_other_types
case_ directory_skips_what_is_not_a_tensor directory_skips_what_is_not_a_tensor
case_ directories_must_match directories_must_match
case_ directory_output_named_like_a_file directory_output_named_like_a_file
case_ input_lists input_lists
case_ stdin_and_stdout stdin_and_stdout
case_ lists_per_tensor_and_resume lists_per_tensor_and_resume
case_ stdout_only_after_success stdout_only_after_success
case_ stdout_leaves_nothing_in_tmpdir stdout_leaves_nothing_in_tmpdir
case_ flags_that_do_not_apply flags_that_do_not_apply
case_ check_is_a_dry_run check_is_a_dry_run
case_ check_says_which_flags_it_takes check_says_which_flags_it_takes
case_ bad_inputs_all_named_in_one_pass bad_inputs_all_named_in_one_pass
case_ check_reports_each_size_of_its_own check_reports_each_size_of_its_own
case_ check_reports_the_host_memory check_reports_the_host_memory
case_ run_short_of_memory_says_what_it_needs run_short_of_memory_says_what_it_needs
case_ check_estimates_the_host_memory check_estimates_the_host_memory
case_ check_refuses_a_kernel_run_refuses check_refuses_a_kernel_run_refuses
case_ reported_time_is_the_whole_run reported_time_is_the_whole_run
case_ info_ceilings_without_cuda_warns info_ceilings_without_cuda_warns
case_ help_says_the_defaults help_says_the_defaults
case_ progress_line_only_where_it_belongs progress_line_only_where_it_belongs
case_ bench_io_checks_its_outputs bench_io_checks_its_outputs
case_ bench_io_cleans_up_when_stopped bench_io_cleans_up_when_stopped
case_ peak_rss_is_the_runs_own peak_rss_is_the_runs_own
case_ constants_given_to_every_tensor constants_given_to_every_tensor
case_ constants_refused_clearly constants_refused_clearly
exit $failed
