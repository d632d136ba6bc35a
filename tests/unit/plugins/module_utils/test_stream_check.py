"""stream_check.judge: whether a streamed answer arrived in pieces (the seeds' `curl -N` check)."""

import json

from ansible_collections.pvegpu.llmstack.plugins.module_utils import stream_check


def event(text, model="fast"):
    return "data: " + json.dumps({"model": model, "choices": [{"delta": {"content": text}}]})


def spaced(words, gap=0.02, start=0.1):
    lines, reads = [], []
    for index, word in enumerate(words):
        at = start + index * gap
        lines += [(at, event(word)), (at, "")]
        reads.append((at, 60))
    end = start + len(words) * gap
    lines.append((end, "data: [DONE]"))
    reads += [(end, 14), (end, 0)]
    return lines, reads


def test_an_answer_in_pieces_streams():
    lines, reads = spaced(["One", " two", " three"])
    verdict = stream_check.judge(200, lines, reads)
    assert verdict["streamed"] and verdict["problems"] == []
    seen = (verdict["content_events"], verdict["reads"], verdict["text"], verdict["model"])
    assert seen == (3, 4, "One two three", "fast")
    assert verdict["spread_s"] == 0.06 and verdict["first_content_s"] == 0.1


def test_everything_in_one_read_at_the_end_is_a_buffering_proxy():
    lines, _reads = spaced(["One", " two", " three"])
    lines = [(0.5, line) for _at, line in lines]
    verdict = stream_check.judge(200, lines, [(0.5, 400), (0.5, 0)])
    assert not verdict["streamed"]
    assert any("buffers the stream" in p for p in verdict["problems"])


def test_no_done_one_content_event_an_error_event_and_a_bad_status_are_named():
    verdict = stream_check.judge(500, [(0.1, event("only")), (0.2, 'data: {"error": {"message": "no deployments"}}')],
                                 [(0.1, 40), (0.2, 40), (0.2, 0)])
    problems = " | ".join(verdict["problems"])
    assert "HTTP status 500" in problems and "did not end with data: [DONE]" in problems
    assert "1 event(s) with content" in problems and "no deployments" in problems


def test_first_model_of_a_listing():
    assert stream_check.first_model('{"data": [{"id": "fast"}, {"id": "reasoning"}]}') == "fast"
    assert stream_check.first_model("not json") is None and stream_check.first_model('{"data": []}') is None
