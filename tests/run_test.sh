#!/usr/bin/env bash
# run_test.sh - `graphrun run` end to end on the host backend: NumPy writes the inputs and
# checks the outputs (tests/npy_tool.py), so nothing here trusts graphrun's own .npy code.
# Covers .npy and raw files, directories, a two-input graph, the JSON summary, environment
# defaults, device lists on emulated devices, a manifest, every refusal (with its message, and
# no output file left behind), and Ctrl-C (exit 130, nothing written).
set -u
bin="${TEST_SRCDIR}/graphrun/tools/graphrun/graphrun"
examples="${TEST_SRCDIR}/graphrun/graph/examples"
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
has() { grep -qF -- "$2" "$1" || { echo "    missing \"$2\" in:"; sed 's/^/    | /' "$1"; return 1; }; }
absent() { # nothing at PATH, nor a temporary file of ours beside it
  local d; d=$(dirname "$1")
  [[ ! -e $1 ]] || { echo "    $1 exists"; return 1; }
  ! ls -a "$d" 2>/dev/null | grep -q 'graphrun-' || { echo "    temporary files left in $d"; ls -a "$d"; return 1; }
}
np() { "$py" "$tool" "$@"; }

failed=0
case_() { local name=$1; shift; if "$@"; then echo "PASS $name"; else echo "FAIL $name"; failed=1; fi; }

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
    absent "$T/dev3.npy" && run 3 run --graph "$examples/seed.graph" --input "$T/a.npy" \
      --output "$T/dev4.npy" --host-devices 2 --devices 1,5 &&
    has "$err" "device 5 is not present: the host backend has 2 device(s)" &&
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
    --input "$T/f8.npy" --output "$T/f8_out.npy" && has "$err" "f8.npy" && has "$err" "<f8" &&
    absent "$T/f8_out.npy" && run 2 run --graph "$examples/seed.graph" --input "$T/r.bin" \
    --dtype float64 --output "$T/f8_raw_out.bin" && has "$err" "--dtype float64 is not supported" &&
    absent "$T/f8_raw_out.bin"
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
existing_output_needs_force() {
  cp "$T/a.npy" "$T/keep.npy" && run 2 run --graph "$examples/seed.graph" --input "$T/a.npy" \
    --output "$T/keep.npy" && has "$err" "exists (use --force" && cmp -s "$T/a.npy" "$T/keep.npy" &&
    run 0 run --graph "$examples/seed.graph" --input "$T/a.npy" --output "$T/keep.npy" --force &&
    np check-seed "$T/keep.npy" "$T/a.npy"
}
interrupted_run_writes_nothing() {
  local i pid rc delay
  mkdir -p "$T/big_in"
  "$py" -c '
import numpy as np, sys
rng = np.random.default_rng(1)
for i in range(48):
    np.save(f"{sys.argv[1]}/t{i:02d}.npy", rng.random(1 << 20, dtype=np.float32))' "$T/big_in" || return 1
  # The run takes about 1.5 s here; a faster machine may finish before the signal comes,
  # which proves nothing either way, so then try again with less time before the signal.
  # Not much less: a background job of a non-interactive shell starts with SIGINT ignored
  # until graphrun installs its handler, so a signal sent at once could be lost.
  for delay in 0.5 0.3 0.2; do
    rm -rf "$T/big_out"
    "$bin" run --graph "$examples/seed_unfused.graph" --input "$T/big_in" --output "$T/big_out" \
      --workers 1 --progress never >"$out" 2>"$err" &
    pid=$!
    sleep "$delay"
    kill -INT "$pid"
    wait "$pid"
    rc=$?
    [[ $rc == 0 ]] || break
    echo "    finished within $delay s, before the signal: again, sooner"
  done
  [[ $rc == 130 ]] || { echo "    exit $rc, expected 130"; sed 's/^/    | /' "$out" "$err"; return 1; }
  has "$err" "interrupted" && has "$err" "no output written" &&
    [[ -z $(ls -A "$T/big_out" 2>/dev/null) ]] || { echo "    left in big_out:"; ls -A "$T/big_out"; return 1; }
}

case_ npy_round_trip npy_round_trip
case_ npy_shapes npy_shapes
case_ raw_files raw_files
case_ directories directories
case_ two_inputs_two_outputs two_inputs_two_outputs
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

case_ json_summary json_summary
case_ environment_defaults environment_defaults
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
case_ interrupted_run_writes_nothing interrupted_run_writes_nothing
case_ softmax_rows_of_npy_shapes softmax_rows_of_npy_shapes
case_ sum_to_one_element_outputs sum_to_one_element_outputs
case_ cuda_source_kernels_refused_on_host cuda_source_kernels_refused_on_host
exit $failed
