#!/usr/bin/env bash
# mpi_test.sh - `graphrun run --mpi` under Open MPI's mpirun, on the host backend, offline
# (shared memory between ranks, out-of-band traffic on the loopback interface only).
#
# NumPy writes the inputs and checks every output (tests/npy_tool.py), and the manifest is
# checked against the rule that tensor i is rank i % ranks's. The failure cases each make
# one rank fail a different way, a bad input in its shard, an injected failure after the
# other rank has written its outputs, a crash (SIGKILL) while the other rank runs its job,
# a hang, and check that the whole run fails with a message naming the rank, within a
# bounded time, and leaves no output, no manifest and no temporary file behind (except the
# temporary files a rank had already written when it was killed: nothing can remove those)
# when it failed before the job or with --all-or-nothing; per tensor (the default), every
# rank keeps what it did, failed tensors are listed per rank in the merged manifest, and
# --resume runs only the rest.
#
# Failures are injected with GR_TEST_RANK_FAULT=RANK:STEP:WHAT (tools/graphrun/ranks.c),
# which graphrun obeys only under --mpi.
set -u
bin="${TEST_SRCDIR}/graphrun/tools/graphrun/graphrun"
examples="${TEST_SRCDIR}/graphrun/graph/examples"
tool="${TEST_SRCDIR}/graphrun/tests/npy_tool.py"
supp="${TEST_SRCDIR}/graphrun/tests/openmpi.supp"
py=/usr/bin/python3
T="${TEST_TMPDIR}/mpi"
rm -rf "$T" && mkdir -p "$T"
out="$T/stdout" err="$T/stderr"

if ! command -v mpirun >/dev/null; then
  echo "SKIP mpi_test: mpirun not found (apt-get install openmpi-bin, or tools/ensure_deps)"
  exit 0
fi
# Offline and quiet: ranks talk through shared memory (vader; no single-copy mechanism, which
# needs ptrace rights a sandbox may not give), mpirun and its ranks over the loopback
# interface only, no InfiniBand/UCX probing, no binding to cores (the ranks oversubscribe).
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none \
  OMPI_MCA_pml=ob1 OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_hwloc_base_binding_policy=none \
  OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_base_warn_component_unused=0
if ((EUID == 0)); then # mpirun refuses root unless told twice
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# A directory of this run's own for Open MPI's session directory and shared-memory segments.
# By default they are /tmp/ompi.HOST.UID/pid.PID and /dev/shm/vader_segment.HOST.UID.JOBID.*,
# the job id made from mpirun's PID; Bazel's sandbox gives each test a PID namespace, so two
# runs at once (--runs_per_test, two workspaces on one machine) have the same PIDs and the
# same names: one mpirun's cleanup removed the other's session directory (MPI_Init failed,
# or mpirun hung until the timeout). Short, under /tmp: PMIx puts Unix sockets in it, and
# $TEST_TMPDIR is too long a path for those.
ompi_tmp=$(mktemp -d /tmp/graphrun_mpi.XXXXXX) || { echo "FAIL mpi_test: mktemp"; exit 1; }
trap 'rm -rf "$ompi_tmp"' EXIT
export OMPI_MCA_orte_tmpdir_base=$ompi_tmp OMPI_MCA_btl_vader_backing_directory=$ompi_tmp \
  OMPI_MCA_osc_sm_backing_directory=$ompi_tmp OMPI_MCA_osc_rdma_backing_directory=$ompi_tmp
# Sanitizer builds (tools/test --config asan): Open MPI's own allocations that it never frees
# would fail every rank at exit. tests/openmpi.supp names Open MPI's libraries only (and the
# full unwind it needs to see them); graphrun's own leaks are still reported.
export LSAN_OPTIONS="suppressions=$supp:print_suppressions=0"
export ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}fast_unwind_on_malloc=0"
export GR_BACKEND=host

mpi() { # EXPECTED_RC NP ARGS...: mpirun -np NP graphrun ARGS, bounded by a timeout
  local want=$1 np=$2 rc
  shift 2
  timeout -k 5 120 mpirun --oversubscribe -np "$np" "$bin" "$@" >"$out" 2>"$err"
  rc=$?
  if [[ $want == nonzero && $rc != 0 && $rc != 124 ]] || [[ $rc == "$want" ]]; then
    return 0
  fi
  echo "    mpirun -np $np graphrun $*: exit $rc, expected $want"
  sed 's/^/    | /' "$out" "$err"
  return 1
}
has() { grep -qF -- "$2" "$1" || { echo "    missing \"$2\" in:"; sed 's/^/    | /' "$1"; return 1; }; }
np() { "$py" "$tool" "$@"; }
# Nothing written: no output directory content, no manifest, no temporary file of ours.
nothing_in() { # OUTPUT_DIR [ALLOWED_TEMPORARY_PATTERN]
  local d=$1 allowed=${2:-} left
  left=$(ls -A "$d" 2>/dev/null | grep -v -E "${allowed:-^$}")
  [[ -z $left ]] || { echo "    left in $d:"; echo "$left" | sed 's/^/    | /'; return 1; }
  [[ ! -e $d.manifest.json ]] || { echo "    $d.manifest.json exists"; return 1; }
  ! ls -A "$(dirname "$d")" | grep -q "manifest.json.graphrun-" ||
    { echo "    temporary manifest left"; ls -A "$(dirname "$d")"; return 1; }
}
elapsed_below() { # SECONDS since $t0
  local s=$((SECONDS - t0))
  ((s < $1)) || { echo "    took ${s} s (limit $1 s)"; return 1; }
}

failed=0
case_() { local name=$1; shift; if "$@"; then echo "PASS $name"; else echo "FAIL $name"; failed=1; fi; }

make_dir() { # DIR COUNT FIRST_SEED
  local i
  mkdir -p "$1"
  for ((i = 0; i < $2; i++)); do
    np make "$1/t$i.npy" "$((37 + i * 101))" "$(($3 + i))" || return 1
  done
}
make_dir "$T/in7" 7 100 && make_dir "$T/a4" 4 200 && make_dir "$T/b4" 4 300 &&
  np make "$T/one.npy" 5,6 7 && make_dir "$T/slow" 12 400 || { echo "FAIL mpi_test: setup"; exit 1; }
"$py" -c '
import numpy as np, sys
rng = np.random.default_rng(2)
for i in range(12):
    np.save(f"{sys.argv[1]}/t{i}.npy", rng.random(1 << 19, dtype=np.float32))' "$T/slow"

two_ranks_outputs_verified() {
  local i
  mpi 0 2 run --mpi --graph "$examples/seed.graph" --input "$T/in7" --output "$T/out7" &&
    has "$out" "ok: 7 of 7 tensors done on 2 ranks" || return 1
  for i in 0 1 2 3 4 5 6; do np check-seed "$T/out7/t$i.npy" "$T/in7/t$i.npy" || return 1; done
  [[ $(ls -A "$T/out7" | wc -l) == 7 ]] || { echo "    not 7 files:"; ls -A "$T/out7"; return 1; }
  "$py" - "$T/out7.manifest.json" "$T/out7" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
assert m["status"] == "ok" and m["ranks"] == 2 and m["tensors"] == 7, m
assert m["done"] == 7 and m["outputs_written"] == 7 and m["errors"] == {}, m
assert [r["tensors"] for r in m["per_rank"]] == [4, 3], m["per_rank"]
assert all(r["done"] == r["tensors"] and r["backend"] == "host" for r in m["per_rank"]), m
assert sum(r["bytes_in"] for r in m["per_rank"]) == m["bytes_in"] > 0, m
files = m["files"]
assert [f["index"] for f in files] == list(range(7)), files
assert [f["name"] for f in files] == [f"t{i}.npy" for i in range(7)], files
assert [f["rank"] for f in files] == [i % 2 for i in range(7)], files
assert [f["outputs"] for f in files] == [[f"{sys.argv[2]}/t{i}.npy"] for i in range(7)], files
PY
}

three_ranks_dag_json() {
  local i
  mpi 0 3 run --mpi --json --graph "$examples/dag.graph" --input "$T/a4" --input "$T/b4" \
    --output "$T/o0" --output "$T/o1" --manifest "$T/dag.json" || return 1
  for i in 0 1 2 3; do
    np check-dag "$T/o0/t$i.npy" "$T/o1/t$i.npy" "$T/a4/t$i.npy" "$T/b4/t$i.npy" || return 1
  done
  "$py" - "$out" "$T/dag.json" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.strip()]
assert len(lines) == 1, lines  # rank 0 alone prints the summary
d = json.loads(lines[0])
assert d["status"] == "ok" and d["ranks"] == 3 and d["done"] == 4, d
assert d["outputs_written"] == 8, d
assert [r["tensors"] for r in d["per_rank"]] == [2, 1, 1], d["per_rank"]
m = json.load(open(sys.argv[2]))
assert [f["rank"] for f in m["files"]] == [0, 1, 2, 0], m["files"]
assert all(len(f["outputs"]) == 2 for f in m["files"]), m["files"]
PY
}

more_ranks_than_tensors() {
  mpi 0 3 run --mpi --graph "$examples/seed.graph" --input "$T/one.npy" \
    --output "$T/one_out.npy" && np check-seed "$T/one_out.npy" "$T/one.npy" &&
    "$py" -c '
import json, sys
m = json.load(open(sys.argv[1]))
assert [r["tensors"] for r in m["per_rank"]] == [1, 0, 0], m["per_rank"]
assert [f["rank"] for f in m["files"]] == [0], m["files"]' "$T/one_out.npy.manifest.json"
}

bad_input_in_one_rank_fails_all() {
  cp -r "$T/in7" "$T/bad_in" &&
    printf '\x93NUMPY\x01\x00\x10\x00{garbage}      \n' >"$T/bad_in/t3.npy" || return 1
  t0=$SECONDS
  mpi 2 2 run --mpi --graph "$examples/seed.graph" --input "$T/bad_in" --output "$T/bad_out" &&
    has "$err" "rank 1 of 2: $T/bad_in/t3.npy: malformed .npy header" && elapsed_below 60 &&
    nothing_in "$T/bad_out"
}

injected_failure_after_writing_removes_everything() { # --all-or-nothing
  t0=$SECONDS
  GR_TEST_RANK_FAULT=1:writing:fail mpi 1 2 run --mpi --all-or-nothing \
    --graph "$examples/seed.graph" --input "$T/in7" --output "$T/inj_out" &&
    has "$err" "rank 1 of 2: injected failure" &&
    has "$err" "failed: no output written" && has "$out" "0 outputs written" &&
    elapsed_below 60 && nothing_in "$T/inj_out"
}

injected_failure_after_writing_keeps_what_is_done() { # per tensor, the default
  local i
  t0=$SECONDS
  GR_TEST_RANK_FAULT=1:writing:fail mpi 1 2 run --mpi --graph "$examples/seed.graph" \
    --input "$T/in7" --output "$T/keep_out" && has "$err" "rank 1 of 2: injected failure" &&
    has "$err" "graphrun run: failed: 7 of 7 done, written; 0 not run; rerun with --resume" &&
    has "$out" "failed: 7 of 7 tensors done on 2 ranks, 0 failed, 0 not run; 7 outputs written" &&
    elapsed_below 60 || return 1
  for i in 0 1 2 3 4 5 6; do np check-seed "$T/keep_out/t$i.npy" "$T/in7/t$i.npy" || return 1; done
  mpi 0 2 run --mpi --graph "$examples/seed.graph" --input "$T/in7" --output "$T/keep_out" \
    --resume && has "$out" "ok: 7 of 7 tensors done on 2 ranks (7 by an earlier run)"
}

failing_tensors_per_rank_and_resume() { # GR_FAULT in every rank: each one's second tensor
  # (one unit each: 2 MiB, not batched)
  local i
  GR_FAULT=arena:2 mpi 1 2 run --mpi --keep-going --workers 1 \
    --graph "$examples/seed_unfused.graph" --input "$T/slow" --output "$T/fail_out" &&
    has "$out" "failed: 10 of 12 tensors done on 2 ranks, 2 failed, 0 not run; 10 outputs written" &&
    has "$err" "graphrun run: rank 0: tensor 2 ($T/slow/t10.npy) failed: out of host memory" &&
    has "$err" "graphrun run: rank 1: tensor 3 ($T/slow/t11.npy) failed: out of host memory" ||
    return 1
  "$py" - "$T/fail_out.manifest.json" <<'PY' || return 1
import json, os, sys
m = json.load(open(sys.argv[1]))
assert m["status"] == "failed" and m["ranks"] == 2 and m["done"] == 10 and m["failed"] == 2, m
files = m["files"]
assert [f["index"] for f in files] == list(range(12)), files
assert [f["rank"] for f in files] == [i % 2 for i in range(12)], files
st = [f["status"] for f in files]
assert st == ["failed" if i in (2, 3) else "done" for i in range(12)], st
assert all("injected fault" in files[i]["error"]["message"] for i in (2, 3)), files
assert not any(os.path.exists(f"{sys.argv[1]}.rank{k}") for k in range(2)), "rank manifests left"
PY
  # Sorted by name, tensors 2 and 3 are t10 and t11.
  for i in 10 11; do
    [[ ! -e $T/fail_out/t$i.npy ]] || { echo "    t$i.npy written"; return 1; }
  done
  mpi 0 2 run --mpi --resume --graph "$examples/seed_unfused.graph" --input "$T/slow" \
    --output "$T/fail_out" &&
    has "$out" "ok: 12 of 12 tensors done on 2 ranks (10 by an earlier run), 0 failed, 0 not run; 2 outputs written" ||
    return 1
  "$py" - "$T/fail_out" "$T/slow" "$tool" <<'PY'
import os, sys
sys.path.insert(0, os.path.dirname(sys.argv[3]))
import numpy as np, npy_tool
assert sorted(os.listdir(sys.argv[1])) == sorted(f"t{i}.npy" for i in range(12))
for i in range(12):
    npy_tool.same(np.load(f"{sys.argv[1]}/t{i}.npy"),
                  npy_tool.seed(np.load(f"{sys.argv[2]}/t{i}.npy")), f"t{i}")
PY
}

rank_killed_while_the_other_runs() {
  t0=$SECONDS
  # Rank 1 dies as both start their jobs; rank 0, running or waiting, is ended by mpirun.
  GR_TEST_RANK_FAULT=1:starting:kill mpi nonzero 2 run --mpi --workers 1 \
    --graph "$examples/seed_unfused.graph" --input "$T/slow" --output "$T/kill_out" &&
    has "$err" "GR_TEST_RANK_FAULT: kill at 'starting the runtime'" && elapsed_below 60 &&
    nothing_in "$T/kill_out"
}

rank_killed_after_writing_leaves_only_its_temporaries() {
  t0=$SECONDS
  # Killed once its outputs are in temporary files: those stay (odd indices: rank 1's),
  # rank 0 removes its own, nothing is renamed into place.
  GR_TEST_RANK_FAULT=1:writing:kill mpi nonzero 2 run --mpi --all-or-nothing \
    --graph "$examples/seed.graph" --input "$T/in7" --output "$T/killw_out" &&
    elapsed_below 60 && nothing_in "$T/killw_out" '^\.t[135]\.npy\.graphrun-tmp\.'
}

hung_rank_times_out() {
  t0=$SECONDS
  GR_TEST_RANK_FAULT=1:planning:hang mpi nonzero 2 run --mpi --mpi-timeout 2 \
    --graph "$examples/seed.graph" --input "$T/in7" --output "$T/hang_out" &&
    has "$err" "the other ranks did not all reach the step 'planning inputs' within 2 s" &&
    elapsed_below 60 && nothing_in "$T/hang_out"
}

mpirun_without_mpi_is_refused() {
  mpi 2 2 run --graph "$examples/seed.graph" --input "$T/in7" --output "$T/nompi_out" &&
    has "$err" "without --mpi" && nothing_in "$T/nompi_out"
}

existing_manifest_needs_force() {
  echo keep >"$T/keep.json" &&
    mpi 2 2 run --mpi --graph "$examples/seed.graph" --input "$T/in7" --output "$T/mf_out" \
      --manifest "$T/keep.json" && has "$err" "manifest $T/keep.json exists" &&
    [[ $(cat "$T/keep.json") == keep ]] && nothing_in "$T/mf_out" &&
    mpi 0 2 run --mpi --graph "$examples/seed.graph" --input "$T/in7" --output "$T/mf_out" \
      --manifest "$T/keep.json" --force && "$py" -c '
import json, sys; assert json.load(open(sys.argv[1]))["status"] == "ok"' "$T/keep.json"
}

graphrun_does_not_link_mpi() {
  # MPI is loaded (from libgraphrun_mpi.so) only for --mpi: graphrun itself starts where
  # Open MPI is not installed.
  if readelf -d "$bin" | grep -i 'NEEDED.*mpi'; then return 1; fi
  readelf -d "$(dirname "$(readlink -f "$bin")")/libgraphrun_mpi.so" | grep -q 'NEEDED.*libmpi'
}

missing_plugin_is_a_clear_error() {
  # graphrun alone (as if copied without libgraphrun_mpi.so): --mpi says what is missing.
  mkdir -p "$T/lone" && cp "$bin" "$T/lone/graphrun" || return 1
  "$T/lone/graphrun" run --mpi --graph "$examples/seed.graph" --input "$T/in7" \
    --output "$T/lone_out" >"$out" 2>"$err"
  local rc=$?
  [[ $rc == 3 ]] || { echo "    exit $rc, expected 3"; sed 's/^/    | /' "$err"; return 1; }
  has "$err" "--mpi needs $T/lone/libgraphrun_mpi.so" && nothing_in "$T/lone_out"
}

case_ mpi_two_ranks_outputs_verified two_ranks_outputs_verified
case_ mpi_three_ranks_dag_json three_ranks_dag_json
case_ mpi_more_ranks_than_tensors more_ranks_than_tensors
case_ mpi_bad_input_in_one_rank_fails_all bad_input_in_one_rank_fails_all
case_ mpi_injected_failure_after_writing_removes_everything injected_failure_after_writing_removes_everything
case_ mpi_injected_failure_after_writing_keeps_what_is_done injected_failure_after_writing_keeps_what_is_done
case_ mpi_failing_tensors_per_rank_and_resume failing_tensors_per_rank_and_resume
case_ mpi_rank_killed_while_the_other_runs rank_killed_while_the_other_runs
case_ mpi_rank_killed_after_writing_leaves_only_its_temporaries rank_killed_after_writing_leaves_only_its_temporaries
case_ mpi_hung_rank_times_out hung_rank_times_out
case_ mpi_mpirun_without_mpi_is_refused mpirun_without_mpi_is_refused
case_ mpi_existing_manifest_needs_force existing_manifest_needs_force
case_ mpi_graphrun_does_not_link_mpi graphrun_does_not_link_mpi
case_ mpi_missing_plugin_is_a_clear_error missing_plugin_is_a_clear_error
exit $failed
