#!/usr/bin/env bash
# sizes_test.sh - the size sweep and its picture without a GPU: tools/bench/sizes_bench's
# plan and command line (--dry-run, refusals with status 2), its graphrun rows end to end
# through a stand-in for `graphrun bench --json` (tests/sizes_fake_graphrun.py: a wrong or
# failed row fails the run), peers_bench's helpers loaded as sizes_bench loads them, and
# tools/bench/plot_sizes on tests/data/sizes_sample.jsonl and on the stand-in's sweep: an SVG that
# parses with one line per method and the ceiling, a PNG, the same bytes twice. The plot
# cases SKIP where /usr/bin/python3 has no matplotlib (tools/ensure_deps installs it).
set -u
cd "${TEST_SRCDIR}/graphrun" || exit 1
work="${TEST_TMPDIR}/sizes"
rm -rf "$work" && mkdir -p "$work"
export MPLCONFIGDIR="$work/mpl"
. tests/bench_stand_in.sh

sb=($py tools/bench/sizes_bench --bin "$work/graphrun")

dry_run_default_plan() {
  status 0 "${sb[@]}" --dry-run || return 1
  has "9 sizes x 5 methods = 45 rows" && has "estimated" && has "4 KiB gr-contiguous +50000 " &&
    has "400 MB gr-separate +16 +6.40 +1146MiB" &&
    has "64 MiB torch-pinned +96 "
}
dry_run_quick_is_shorter() {
  local full quick
  status 0 "${sb[@]}" --dry-run || return 1
  full=$(sed -n 's/.*estimated \([0-9]*\) s.*/\1/p' "$out")
  status 0 "${sb[@]}" --dry-run --quick --sizes 1M,400MB --only gr-separate,torch-pinned || return 1
  quick=$(sed -n 's/.*estimated \([0-9]*\) s.*/\1/p' "$out")
  has "2 sizes x 2 methods = 4 rows" && has "400 MB gr-separate +8 " &&
    ((quick < full)) || { echo "    quick $quick s, full $full s"; return 1; }
}
refuses() { status 2 "${sb[@]}" --dry-run "$@" && has "error"; }

graphrun_rows_end_to_end() {
  status 0 "${sb[@]}" --only gr-contiguous,gr-separate,gr-pageable --sizes 4K,1M,400MB \
    --commit abc1234 --gr-args "--workers 4" --json "$work/gr.jsonl" || return 1
  has "link ceiling: both directions at once 98.0 GB/s" && has "all 50000" &&
    $py - "$work/gr.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
h, rows = lines[0], lines[1:]
assert h["header"] and h["commit"] == "abc1234" and h["link_ceiling_gbs"] == 98.0, h
assert len(rows) == 9, len(rows)
for r in rows:
    assert r["ok"] and r["verified"] and r["kind"] == "graphrun", r
    assert r["detail"]["workers"] == 4 and r["args"][-2:] == ["--workers", "4"], r["args"]
    assert abs(r["ratio"] - 2 * r["gbs_each_way"] / 98.0) < 1e-9, r
    assert r["ceiling_gbs"] == 98.0 and r["row_ceiling_gbs"] > 0, r
big = [r for r in rows if r["size_bytes"] == 400000000]
assert {r["budget"] for r in big} == {1146 << 20} and {r["count"] for r in big} == {16}, big
PY
}
wrong_row_fails_the_run() {
  SIZES_FAKE_WRONG=262144 status 1 "${sb[@]}" --only gr-separate --sizes 4K,1M,4M \
    --json "$work/wrong.jsonl" || return 1
  has "FAILED: 1 MiB graphrun pinned separate" && has "3 wrong" && has "4 MiB" &&
    [[ $(wc -l <"$work/wrong.jsonl") == 4 ]]
}
failed_row_fails_the_run() {
  SIZES_FAKE_FAIL=1024 status 1 "${sb[@]}" --only gr-contiguous --sizes 4K,16K || return 1
  has "exit status 3" && has "CUDA error .fake." && has "16 KiB graphrun pinned contiguous"
}
bench_helpers_load() {
  $py - <<'PY' >"$out" 2>&1 || { show; return 1; }
import importlib.machinery, importlib.util
loader = importlib.machinery.SourceFileLoader("sizes_bench", "tools/bench/sizes_bench")
spec = importlib.util.spec_from_loader(loader.name, loader)
sb = importlib.util.module_from_spec(spec)
loader.exec_module(sb)
bench = sb.load_bench()
for name in ("Peers", "seed_ref", "check"):
    assert hasattr(bench, name), name
x = bench.np.array([0.5, 2.0], dtype=bench.np.float32)
assert bench.seed_ref(x).dtype == bench.np.float32
assert sb.parse_size("400MB") == 400_000_000 and sb.parse_size("1.5KiB") == 1536
assert sb.default_budget(400_000_000) == 1146 << 20 and sb.default_budget(64 << 20) == 1 << 30
assert sb.checked_indices(4096, 10) == list(range(10))
assert sb.checked_indices(400_000_000, 16) == [0, 1, 15]
PY
}

# plot_case NAME JSONL METHODS...: both files, an SVG with exactly these method lines and
# the ceiling, a PNG, the same bytes from a second run.
plot() {
  local jsonl=$1; shift
  status 0 $py tools/bench/plot_sizes "$jsonl" "$work/p1" || return 1
  status 0 $py tools/bench/plot_sizes "$jsonl" "$work/p2" || return 1
  cmp -s "$work/p1.svg" "$work/p2.svg" || { echo "    the SVG differs between two runs"; return 1; }
  cmp -s "$work/p1.png" "$work/p2.png" || { echo "    the PNG differs between two runs"; return 1; }
  $py - "$work/p1" "$@" <<'PY'
import sys
import xml.etree.ElementTree as ET
prefix, want = sys.argv[1], sorted(sys.argv[2:])
root = ET.parse(prefix + ".svg").getroot()
ids = [e.get("id") for e in root.iter() if e.get("id")]
lines = sorted(i[len("method-"):] for i in ids if i.startswith("method-"))
assert lines == want, (lines, want)
assert ids.count("link-ceiling") == 1, "no single link-ceiling line"
svg = open(prefix + ".svg").read()
assert "<dc:date>" not in svg, "a date in the SVG"
png = open(prefix + ".png", "rb").read()
assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20000, len(png)
assert len(svg) > 20000, len(svg)
PY
}
plot_sample() {
  plot tests/data/sizes_sample.jsonl gr-contiguous gr-separate gr-pageable torch-pinned \
    torch-pageable
}
plot_graphrun_sweep() {
  [[ -s $work/gr.jsonl ]] || { echo "    no sweep (graphrun_rows_end_to_end failed)"; return 1; }
  plot "$work/gr.jsonl" gr-contiguous gr-separate gr-pageable
}
plot_refuses_empty() {
  $py -c 'import json; print(json.dumps({"header": True}))' >"$work/empty.jsonl"
  status 1 $py tools/bench/plot_sizes "$work/empty.jsonl" "$work/e" && has "no verified row"
}

case_ sizes_dry_run_default_plan dry_run_default_plan
case_ sizes_dry_run_quick_is_shorter dry_run_quick_is_shorter
case_ sizes_refuses_a_fraction_of_a_byte refuses --sizes 4K,0.3K
case_ sizes_refuses_not_a_size refuses --sizes 4K,big
case_ sizes_refuses_odd_bytes refuses --sizes 4098
case_ sizes_refuses_a_size_twice refuses --sizes 4K,4096
case_ sizes_refuses_unknown_method refuses --only gr-separate,torch-magic
case_ sizes_refuses_small_budget refuses --budget 1MiB
case_ sizes_refuses_bad_gr_args refuses --gr-args '--workers "8'
case_ sizes_graphrun_rows_end_to_end graphrun_rows_end_to_end
case_ sizes_wrong_row_fails_the_run wrong_row_fails_the_run
case_ sizes_failed_row_fails_the_run failed_row_fails_the_run
if $py -c 'import numpy' 2>/dev/null; then
  case_ sizes_bench_helpers_load bench_helpers_load
else
  echo "SKIP sizes_bench_helpers_load: /usr/bin/python3 has no NumPy (tools/ensure_deps installs python3-numpy)"
fi
if $py -c 'import matplotlib' 2>/dev/null; then
  case_ plot_sizes_sample plot_sample
  case_ plot_sizes_graphrun_sweep plot_graphrun_sweep
  case_ plot_sizes_refuses_empty plot_refuses_empty
else
  for c in plot_sizes_sample plot_sizes_graphrun_sweep plot_sizes_refuses_empty; do
    echo "SKIP $c: /usr/bin/python3 has no matplotlib (tools/ensure_deps installs python3-matplotlib)"
  done
fi
exit $failed
