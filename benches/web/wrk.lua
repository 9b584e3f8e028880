-- wrk script of benches/web.sh: at the end, one line of figures for the script to parse
-- (p99.9 included, which wrk's --latency does not print), and the responses whose body says
-- the request was counted. With WRK_LEDGER set (the chaos soak), it also counts the requests
-- sent, so that those still under way when wrk stops are known; the benchmark leaves it unset,
-- as a request() function makes wrk build every request anew.
local threads = {}

if os.getenv("WRK_LEDGER") then
    function request()
        sent = sent + 1
        return wrk.request()
    end
end

function setup(thread)
    table.insert(threads, thread)
end

function init(args)
    counted = 0
    sent = 0
end

function response(status, headers, body)
    if status == 200 and body:find("counted", 1, true) then
        counted = counted + 1
    end
end

function done(summary, latency, requests)
    local total, total_sent = 0, 0
    for _, thread in ipairs(threads) do
        total = total + thread:get("counted")
        total_sent = total_sent + thread:get("sent")
    end
    local e = summary.errors
    io.write(string.format(
        "WRK sent=%d requests=%d duration_us=%d counted=%d non2xx=%d connect=%d read=%d write=%d timeout=%d p50_us=%d p99_us=%d p999_us=%d\n",
        total_sent, summary.requests, summary.duration, total, e.status, e.connect, e.read, e.write, e.timeout,
        latency:percentile(50), latency:percentile(99), latency:percentile(99.9)))
end
