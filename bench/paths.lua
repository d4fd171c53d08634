-- wrk script: GET many distinct paths, read from a file (one per line), round robin.
-- Usage: wrk ... -s bench/paths.lua URL -- PATHS_FILE [BEARER_KEY]
-- Prints one line "BENCH_JSON {...}" with requests/s, latency percentiles (ms) and errors.
local paths = {}
local index = 0

function init(args)
  for line in io.lines(args[1]) do
    paths[#paths + 1] = line
  end
  if args[2] then
    wrk.headers["Authorization"] = "Bearer " .. args[2]
  end
  -- each thread starts at its own place in the list
  index = (tonumber(tostring({}):match("0x(%x+)"), 16) or 0) % #paths
end

function request()
  index = index % #paths + 1
  return wrk.format("GET", paths[index])
end

function done(summary, latency, requests)
  local seconds = summary.duration / 1e6
  local errors = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests": %d, "rps": %.1f, "p50_ms": %.3f, "p99_ms": %.3f, '
      .. '"non_2xx": %d, "socket_errors": %d, "bytes": %d}\n',
    summary.requests, summary.requests / seconds, latency:percentile(50) / 1000,
    latency:percentile(99) / 1000, errors.status,
    errors.connect + errors.read + errors.write + errors.timeout, summary.bytes))
end
