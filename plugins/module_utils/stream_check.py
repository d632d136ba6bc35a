# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The post-deploy check seeds 000 and 001 do by hand (`curl -N` through the proxy): one streamed chat completion,
judged on when its pieces arrived.

:func:`judge` takes what the client saw - the server-sent-event lines with the time each arrived and the number of
reads they came in - and says whether it streamed: a status 200, events that parse, content in at least two events,
the ``[DONE]`` marker, and the first content arriving before the stream ended (a proxy that buffers the response
delivers every event in one read at the end). Plain Python; the ``stream_check`` module makes the request.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json


def request_body(model, prompt, max_tokens):
    return json.dumps({"model": model, "stream": True, "max_tokens": int(max_tokens),
                       "messages": [{"role": "user", "content": prompt}]})


def first_model(listing):
    """The first model id of an OpenAI ``/v1/models`` answer, or None."""
    try:
        data = json.loads(listing) if not isinstance(listing, dict) else listing
        return (data.get("data") or [{}])[0].get("id")
    except (ValueError, AttributeError, IndexError, TypeError):
        return None


def judge(status, lines, reads):
    """{streamed, problems, events, content_events, reads, first_content_s, done_s, spread_s, text, model}.

    ``lines``: [(seconds since the request was sent, line)] in arrival order; ``reads``: [(seconds, bytes)] of the
    socket reads that brought them."""
    problems = []
    events, content, text, model = 0, [], [], None
    done_at = None
    for at, line in lines:
        line = line.strip()
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            done_at = at
            continue
        events += 1
        try:
            event = json.loads(payload)
        except ValueError:
            problems.append("an event is not JSON: %r" % payload[:80])
            continue
        if event.get("error"):
            problems.append("the stream carried an error: %s" % json.dumps(event["error"])[:200])
        model = model or event.get("model")
        for choice in event.get("choices") or []:
            piece = (choice.get("delta") or {}).get("content")
            if piece:
                content.append(at)
                text.append(piece)
    if status != 200:
        problems.append("HTTP status %s, not 200" % status)
    if done_at is None:
        problems.append("the stream did not end with data: [DONE]")
    if len(content) < 2:
        problems.append("%d event(s) with content; a streamed answer has at least 2" % len(content))
    data_reads = [at for at, size in reads if size]
    end = done_at if done_at is not None else (lines[-1][0] if lines else None)
    if len(content) >= 2 and end is not None and (len(data_reads) < 2 or content[0] >= end):
        problems.append("every event arrived at once at the end (%d read(s)): something between the client and "
                        "the model buffers the stream" % len(data_reads))
    return {"streamed": not problems, "problems": problems, "events": events, "content_events": len(content),
            "reads": len(data_reads), "first_content_s": round(content[0], 4) if content else None,
            "done_s": round(done_at, 4) if done_at is not None else None,
            "spread_s": round(end - content[0], 4) if content and end is not None else None,
            "text": "".join(text), "model": model}
