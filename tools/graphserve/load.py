#!/usr/bin/env python3
"""load.py - tools/graphserve_load's client where wrk is not installed (the GPU machine):
CONNECTIONS threads, each with one keep-alive connection, POST one fixed tensor to
graphserve until DURATION seconds have passed or REQUESTS responses came back, and check
every response byte for byte against the expected body. Prints the same "key value" lines
as load.lua (requests, ok, mismatched, bad_status, first_bad_status, errors_*, duration_us,
active_us, p50_us, p90_us, p99_us, max_us, mean_us), which graphserve_load parses.

  load.py URL PATH INPUT EXPECTED CONNECTIONS DURATION REQUESTS [CONTENT_TYPE]

Python's threads share one interpreter lock: with small tensors this client, not the
server, may be what limits requests/s (graphserve_load says which client ran).
"""
import http.client
import sys
import threading
import time
import urllib.parse


def main():
    url, path, inp, expected, conns, duration, cap = sys.argv[1:8]
    ctype = sys.argv[8] if len(sys.argv) > 8 else "application/x-npy"
    u = urllib.parse.urlsplit(url)
    body = open(inp, "rb").read()
    want = open(expected, "rb").read()
    conns, duration, cap = int(conns), float(duration), int(cap)
    lock = threading.Lock()
    fig = dict(requests=0, ok=0, mismatched=0, bad_status=0, first_bad_status=0,
               errors_connect=0, errors_read=0, errors_write=0, errors_status=0,
               errors_timeout=0)
    lat = []
    first = [None]
    last = [0.0]
    start = threading.Barrier(conns + 1)
    stop_at = [0.0]

    def worker():
        c = None
        mine = []
        start.wait()
        while True:
            with lock:
                if fig["requests"] >= cap or time.monotonic() >= stop_at[0]:
                    break
                fig["requests"] += 1
            if c is None:
                try:
                    c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
                    c.connect()
                except OSError:
                    with lock:
                        fig["errors_connect"] += 1
                    c = None
                    continue
            t0 = time.monotonic()
            try:
                c.request("POST", path, body, {"Content-Type": ctype})
            except OSError:
                with lock:
                    fig["errors_write"] += 1
                c.close()
                c = None
                continue
            try:
                r = c.getresponse()
                data = r.read()
            except TimeoutError:
                with lock:
                    fig["errors_timeout"] += 1
                c.close()
                c = None
                continue
            except (OSError, http.client.HTTPException):
                with lock:
                    fig["errors_read"] += 1
                c.close()
                c = None
                continue
            t1 = time.monotonic()
            mine.append(t1 - t0)
            with lock:
                if first[0] is None or t0 < first[0]:
                    first[0] = t0
                last[0] = max(last[0], t1)
                if r.status != 200:
                    fig["bad_status"] += 1
                    fig["first_bad_status"] = fig["first_bad_status"] or r.status
                elif data != want:
                    fig["mismatched"] += 1
                else:
                    fig["ok"] += 1
        if c is not None:
            c.close()
        with lock:
            lat.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(conns)]
    for t in threads:
        t.start()
    t_start = time.monotonic()
    stop_at[0] = t_start + duration
    start.wait()
    for t in threads:
        t.join()
    wall = time.monotonic() - t_start
    lat.sort()

    def pct(p):
        return lat[min(len(lat) - 1, int(len(lat) * p / 100))] * 1e6 if lat else 0

    # Requests counted but never answered (a connect error) are not requests wrk would count.
    fig["requests"] = fig["ok"] + fig["mismatched"] + fig["bad_status"] + \
        fig["errors_read"] + fig["errors_timeout"]
    fig.update(duration_us=wall * 1e6,
               active_us=(last[0] - first[0]) * 1e6 if first[0] is not None else 0,
               p50_us=pct(50), p90_us=pct(90), p99_us=pct(99),
               max_us=lat[-1] * 1e6 if lat else 0,
               mean_us=sum(lat) / len(lat) * 1e6 if lat else 0)
    for k, v in fig.items():
        print(f"{k} {int(v)}")


if __name__ == "__main__":
    main()
