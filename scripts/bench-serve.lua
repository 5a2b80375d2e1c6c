-- wrk script for scripts/bench-serve: POSTs one RunRequest (RUNBOX_BENCH_BODY) with the API key
-- (RUNBOX_BENCH_KEY), waits for each result, and counts the answers that are not a finished
-- run with verdict ok, so a fast wrong answer cannot pass for throughput.
wrk.method = "POST"
wrk.path = "/v1/runs"
wrk.body = os.getenv("RUNBOX_BENCH_BODY")
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("RUNBOX_BENCH_KEY")

local threads = {}

function setup(thread)
    table.insert(threads, thread)
end

function init(args)
    not_ok = 0
end

function response(status, headers, body)
    if status ~= 200 or not string.find(body, '"verdict":"ok"', 1, true) then
        not_ok = not_ok + 1
    end
end

function done(summary, latency, requests)
    local bad = 0
    for _, thread in ipairs(threads) do
        bad = bad + thread:get("not_ok")
    end
    io.write(string.format("RESULT runs_per_s=%.1f p50_ms=%.2f p99_ms=%.2f requests=%d not_ok=%d errors=%d\n",
        summary.requests / (summary.duration / 1e6),
        latency:percentile(50) / 1000, latency:percentile(99) / 1000,
        summary.requests, bad,
        summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout))
end
