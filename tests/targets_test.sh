#!/usr/bin/env bash
# targets_test.sh - tools/bench/targets_bench (the performance targets in one run) without a GPU:
# the plan, the refusals, every row end to end through the stand-in for `graphrun bench
# --json` (tests/sizes_fake_graphrun.py): the table, the JSON Lines, a wrong or failed row
# failing the run while the others still run.
set -u
cd "${TEST_SRCDIR}/graphrun" || exit 1
work="${TEST_TMPDIR}/targets"
rm -rf "$work" && mkdir -p "$work"
. tests/bench_stand_in.sh
tb=($py tools/bench/targets_bench --bin "$work/graphrun")

plan_lists_every_row() {
  status 0 "${tb[@]}" --dry-run && (($(grep -c '^plan: ' "$out") == 18)) &&
    has "^plan: sep64k_own +GR_HOST_POOL=0 graphrun bench --count 12800 --elems 16384" &&
    has "^plan: own64k +graphrun bench --count 12800 --elems 16384 .*--memory hostalloc$" &&
    has "^plan: reg16m +graphrun bench --count 100 --elems 4194304 .*--memory registered$" &&
    has "^plan: b3_64 +graphrun bench --count 64 --elems 100000000 --budget 1146MiB" &&
    has "^plan: pageable_again .*--passes 4 --host-cache 8GiB" &&
    has "^plan: scale .*--count 100 .*--passes 16 then .*--count 10000 .*--passes 3" &&
    ! grep -Eq '^b3_16 ' "$out"
}
every_row_judged() { # the stand-in's figures: some targets met, most not; exit 0 all the same
  status 0 "${tb[@]}" --json "$work/t.jsonl" --commit abc1234 &&
    has "^sep256k +0\.9[0-9]+: target >= 0\.900: met" &&
    has "^sep64k +0\.[0-9]+: target >= 0\.900: NOT met" &&
    has "^small16k +[0-9,]+ tensors/s: target >= 1,000,000 tensors/s: NOT met" &&
    has "^pageable_once +[0-9.]+ GB/s each way \(warm, second job: [0-9.]+\)" &&
    has "^scale +[0-9.]+ \(100: 0\.[0-9]+, 10,000: 0\.[0-9]+\): target within 3%: met" &&
    has "^sep64k_own +0\.[0-9]+: target >= 0\.900: NOT met" &&
    has "^own1m +0\.[0-9]+: target >= 0\.920" &&
    (($(grep -c '^| ' "$out") == 20)) && "$py" - "$work/t.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert rows[0]["header"] and rows[0]["commit"] == "abc1234", rows[0]
body = rows[1:]
assert [r["name"] for r in body][:4] == ["b3_16", "b3_64", "sep64k", "sep64k_own"], body
assert len(body) == 18, body
own = next(r for r in body if r["name"] == "own64k")
assert all(d["memory"] == "hostalloc" for d in own["detail"]), own
assert all(r["error"] is None and r["device"] == "Fake GPU" for r in body), body
again = next(r for r in body if r["name"] == "pageable_again")
assert len(again["detail"]) == 4 and again["measured"] == min(d["ratio"] for d in again["detail"][1:])
own = next(r for r in body if r["name"] == "sep64k_own")
assert all(d["host_pool"] is False for d in own["detail"]), own
assert all(d["host_pool"] is True for d in body[2]["detail"]), body[2]
sep = next(r for r in body if r["name"] == "sep256k")
assert sep["met"] is True and sep["measured"] == sep["detail"][1]["ratio"], sep
PY
}
wrong_or_failed_rows_fail_the_run() {
  SIZES_FAKE_WRONG=16384 status 1 "${tb[@]}" --only sep64k,sep1m &&
    has "^FAIL sep64k: exit status 1" && has "^sep1m +0\.[0-9]+: target" &&
    has "^\| separate pinned 64 KiB >= 0\.900 \| failed \| not measured \|" &&
    SIZES_FAKE_FAIL=4096 status 1 "${tb[@]}" --only small16k && has "^FAIL small16k: exit status 3"
}
refusals() {
  status 2 "${tb[@]}" --only bogus && has "unknown row 'bogus'" &&
    status 2 "${tb[@]}" --no-such-flag
}

case_ plan_lists_every_row plan_lists_every_row
case_ every_row_judged every_row_judged
case_ wrong_or_failed_rows_fail_the_run wrong_or_failed_rows_fail_the_run
case_ refusals refusals
exit $failed
