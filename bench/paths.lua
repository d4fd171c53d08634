-- wrk script: GET many distinct paths, read from a file (one per line), round robin. A line may
-- carry extra headers after a tab, separated by literal "\n" (e.g. "Accept-Encoding: gzip").
-- Usage: wrk ... -s bench/paths.lua URL -- PATHS_FILE [BEARER_KEY|-] [REQUESTS_PER_S]
-- With REQUESTS_PER_S, the requests are paced: each thread sends its share on a fixed schedule
-- (open loop, as long as a connection is free), so latency is measured at that rate rather
-- than at saturation. Prints one line "BENCH_JSON {...}" with requests/s, latency percentiles
-- (ms), errors and the count of each status answered (summed over the threads).
local ffi = require("ffi")
ffi.cdef[[
  typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
  int clock_gettime(int clock_id, bench_timespec *tp);
]]
local clock = ffi.new("bench_timespec")
local CLOCK_MONOTONIC = 1

local function now_ms()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, clock)
  return tonumber(clock.tv_sec) * 1000 + tonumber(clock.tv_nsec) / 1e6
end

local threads = {}
-- This thread's answers by status (each thread runs its own copy; a global, so that done()
-- can read it through thread:get).
statuses = {}

function setup(thread)
  table.insert(threads, thread)
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

local paths = {}
local extras = {}
local index = 0
local interval_ms = nil
local next_at = nil

function init(args)
  for line in io.lines(args[1]) do
    local path, rest = line:match("^([^\t]*)\t?(.*)$")
    paths[#paths + 1] = path
    local headers = {}
    for header in (rest or ""):gmatch("[^\\]+") do
      local cleaned = header:gsub("^n", "")
      local name, value = cleaned:match("^([^:]+):%s*(.*)$")
      if name then
        headers[name] = value
      end
    end
    extras[#extras + 1] = headers
  end
  if args[2] and args[2] ~= "-" then
    wrk.headers["Authorization"] = "Bearer " .. args[2]
  end
  if args[3] then
    -- this thread's share of the rate (wrk.threads is not visible here: passed per thread)
    interval_ms = 1000 / tonumber(args[3])
  end
  -- each thread starts at its own place in the list
  index = (tonumber(tostring({}):match("0x(%x+)"), 16) or 0) % #paths
end

function delay()
  if not interval_ms then
    return 0
  end
  local now = now_ms()
  -- a thread that fell behind does not burst to catch up
  if not next_at or next_at < now - 1000 then
    next_at = now
  end
  next_at = next_at + interval_ms
  local wait = next_at - now
  if wait < 1 then
    return 0
  end
  return math.floor(wait)
end

function request()
  index = index % #paths + 1
  local headers = {}
  for name, value in pairs(wrk.headers) do
    headers[name] = value
  end
  for name, value in pairs(extras[index]) do
    headers[name] = value
  end
  return wrk.format("GET", paths[index], headers)
end

function done(summary, latency, requests)
  local seconds = summary.duration / 1e6
  local errors = summary.errors
  local total = {}
  for _, thread in ipairs(threads) do
    for status, count in pairs(thread:get("statuses")) do
      total[status] = (total[status] or 0) + count
    end
  end
  local counted = {}
  for status, count in pairs(total) do
    counted[#counted + 1] = string.format('"%d": %d', status, count)
  end
  io.write(string.format(
    'BENCH_JSON {"requests": %d, "rps": %.1f, "p50_ms": %.3f, "p99_ms": %.3f, '
      .. '"non_2xx": %d, "socket_errors": %d, "bytes": %d, "statuses": {%s}}\n',
    summary.requests, summary.requests / seconds, latency:percentile(50) / 1000,
    latency:percentile(99) / 1000, errors.status,
    errors.connect + errors.read + errors.write + errors.timeout, summary.bytes,
    table.concat(counted, ", ")))
end
