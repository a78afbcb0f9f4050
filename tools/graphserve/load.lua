-- load.lua - wrk script for tools/graphserve_load: POSTs one fixed tensor to graphserve and
-- checks every response, byte for byte, against the expected result computed beforehand
-- with NumPy (tests/npy_tool.py). Each wrk thread stops after GS_MAX_REQUESTS responses
-- (0: no cap), so a run is bounded in count as well as by wrk's --duration.
--
-- Environment: GS_INPUT and GS_EXPECTED (paths of the request and response bodies),
-- GS_PATH (the request path and query), GS_CONTENT_TYPE, GS_MAX_REQUESTS (per thread).
-- done() prints one "key value" line per figure, which the script parses:
--   requests, ok, mismatched, bad_status, first_bad_status, errors_connect, errors_read,
--   errors_write, errors_status, errors_timeout, duration_us, active_us, p50_us, p90_us,
--   p99_us, max_us, mean_us.
-- duration_us is wrk's own figure, which is always the whole --duration, even when every
-- thread stopped early at its cap; active_us is the time from the first request sent to the
-- last response received, measured here on the monotonic clock: rates use that one.

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } gs_timespec;
int clock_gettime(int clock, gs_timespec *tp);
]]
local CLOCK_MONOTONIC = 1
local ts = ffi.new("gs_timespec")

local function now_us()
   ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
   return tonumber(ts.tv_sec) * 1e6 + tonumber(ts.tv_nsec) / 1e3
end

local threads = {}

function setup(thread)
   table.insert(threads, thread)
end

local function slurp(path)
   local f = assert(io.open(path, "rb"), "cannot open " .. tostring(path))
   local data = f:read("*a")
   f:close()
   return data
end

function init(args)
   local body = slurp(os.getenv("GS_INPUT"))
   expected = slurp(os.getenv("GS_EXPECTED"))
   limit = tonumber(os.getenv("GS_MAX_REQUESTS") or "0") or 0
   responses, ok, mismatched, bad_status, first_bad_status = 0, 0, 0, 0, 0
   wrk.method = "POST"
   wrk.path = os.getenv("GS_PATH")
   wrk.body = body
   wrk.headers["Content-Type"] = os.getenv("GS_CONTENT_TYPE") or "application/x-npy"
   prepared = wrk.format()
   first_us, last_us = 0, 0
end

function request()
   if first_us == 0 then first_us = now_us() end
   return prepared
end

function response(status, headers, body)
   last_us = now_us()
   responses = responses + 1
   if status ~= 200 then
      bad_status = bad_status + 1
      if first_bad_status == 0 then first_bad_status = status end
   elseif body ~= expected then
      mismatched = mismatched + 1
   else
      ok = ok + 1
   end
   if limit > 0 and responses >= limit then
      wrk.thread:stop()
   end
end

function done(summary, latency, requests)
   local sum = { ok = 0, mismatched = 0, bad_status = 0, first_bad_status = 0 }
   local first, last = math.huge, 0
   for _, t in ipairs(threads) do
      if t:get("first_us") > 0 then first = math.min(first, t:get("first_us")) end
      last = math.max(last, t:get("last_us"))
      sum.ok = sum.ok + t:get("ok")
      sum.mismatched = sum.mismatched + t:get("mismatched")
      sum.bad_status = sum.bad_status + t:get("bad_status")
      if sum.first_bad_status == 0 then sum.first_bad_status = t:get("first_bad_status") end
   end
   local e = summary.errors
   local lines = {
      { "requests", summary.requests }, { "ok", sum.ok }, { "mismatched", sum.mismatched },
      { "bad_status", sum.bad_status }, { "first_bad_status", sum.first_bad_status },
      { "errors_connect", e.connect }, { "errors_read", e.read }, { "errors_write", e.write },
      { "errors_status", e.status }, { "errors_timeout", e.timeout },
      { "duration_us", summary.duration },
      { "active_us", last > first and last - first or 0 },
      { "p50_us", latency:percentile(50) }, { "p90_us", latency:percentile(90) },
      { "p99_us", latency:percentile(99) }, { "max_us", latency.max },
      { "mean_us", latency.mean },
   }
   for _, kv in ipairs(lines) do
      io.write(string.format("%s %d\n", kv[1], kv[2]))
   end
end
