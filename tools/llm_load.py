"""A small load client for OpenAI-compatible streaming endpoints (the gateway tests and ``make bench``).

Each worker thread sends ``/v1/chat/completions`` with ``stream: true`` in a loop and records, per request:
the HTTP status, time to first content token, the gaps between content chunks, which upstream answered
(the first word of the content, as tools/fake_vllm.py writes it) and the error body if any.
Plain stdlib (http.client), so it runs in any venv.

    python tools/llm_load.py --url http://127.0.0.1:4000 --key sk-... --model fast --streams 8 --seconds 5
"""

import argparse
import http.client
import json
import statistics
import threading
import time
import urllib.parse


def stream_once(url, key, model, timeout=60.0, context=None):
    """One streaming chat completion; returns a dict with status, ttft, gaps, upstream, error.
    ``https://`` URLs use ``context`` (an ssl.SSLContext, e.g. trusting the internal CA)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=timeout, context=context)
    else:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    body = json.dumps({"model": model, "stream": True, "max_tokens": 64,
                       "messages": [{"role": "user", "content": "hello"}]})
    headers = {"Content-Type": "application/json", "Authorization": "Bearer " + key}
    result = {"status": None, "ttft": None, "gaps": [], "upstream": None, "error": None, "chunks": 0}
    start = time.perf_counter()
    try:
        conn.request("POST", parts.path.rstrip("/") + "/v1/chat/completions", body=body, headers=headers)
        response = conn.getresponse()
        result["status"] = response.status
        if response.status != 200:
            result["error"] = response.read().decode(errors="replace")[:500]
            return result
        last = None
        done = False
        while True:
            line = response.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                break
            chunk = json.loads(data)
            if chunk.get("error"):
                result["error"] = json.dumps(chunk["error"])[:500]
                break
            content = "".join((c.get("delta") or {}).get("content") or "" for c in chunk.get("choices") or [])
            if not content:
                continue
            now = time.perf_counter()
            if last is None:
                result["ttft"] = now - start
                result["upstream"] = content.split()[0] if content.split() else None
            else:
                result["gaps"].append(now - last)
            last = now
            result["chunks"] += 1
        if not done and result["error"] is None:
            result["error"] = "stream ended without [DONE]"
    except (OSError, http.client.HTTPException, ValueError) as exc:
        result["error"] = "%s: %s" % (type(exc).__name__, exc)
    finally:
        conn.close()
    return result


def run_load(url, key, model, streams, seconds=None, requests_per_stream=None, stop_event=None, on_result=None,
             context=None):
    """``streams`` threads sending requests back to back until ``seconds`` pass, each has sent
    ``requests_per_stream``, or ``stop_event`` is set. Returns the list of results (with ``t`` = start offset)."""
    results = []
    lock = threading.Lock()
    begin = time.perf_counter()

    def worker():
        sent = 0
        while True:
            if stop_event is not None and stop_event.is_set():
                return
            if seconds is not None and time.perf_counter() - begin >= seconds:
                return
            if requests_per_stream is not None and sent >= requests_per_stream:
                return
            offset = time.perf_counter() - begin
            result = stream_once(url, key, model, context=context)
            result["t"] = offset
            sent += 1
            with lock:
                results.append(result)
            if on_result is not None:
                on_result(result)

    threads = [threading.Thread(target=worker, daemon=True) for _stream in range(streams)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def percentile(values, pct):
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(round(pct / 100.0 * (len(ordered) - 1)))))
    return ordered[rank]


def summarise(results):
    ttfts = [r["ttft"] for r in results if r["ttft"] is not None]
    gaps = [g for r in results for g in r["gaps"]]
    return {
        "requests": len(results),
        "errors": sum(1 for r in results if r["error"] is not None),
        "ttft_p50_ms": round(percentile(ttfts, 50) * 1000, 2) if ttfts else None,
        "ttft_p99_ms": round(percentile(ttfts, 99) * 1000, 2) if ttfts else None,
        "gap_p50_ms": round(percentile(gaps, 50) * 1000, 2) if gaps else None,
        "gap_p99_ms": round(percentile(gaps, 99) * 1000, 2) if gaps else None,
        "gap_mean_ms": round(statistics.mean(gaps) * 1000, 2) if gaps else None,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--key", default="none")
    parser.add_argument("--model", required=True)
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    results = run_load(args.url, args.key, args.model, args.streams, seconds=args.seconds)
    print(json.dumps(summarise(results), indent=2))


if __name__ == "__main__":
    main()
