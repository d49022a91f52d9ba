"""What of an answer a client of another wire cannot be given, by the names
``x-syntic-dropped`` gives them.

An answer keeps what its upstream sent that the gateway does not interpret (reasoning,
items, citations, a call's own members, the message's and the response's other fields);
a client of the upstream's own wire gets all of it, another wire's client gets what has
an equivalent there (a web citation, ``service_tier`` between the OpenAI wires) and the
rest is named, where the upstream put it::

    answer_drops(response, "openai")
    # e.g. ['content[].thinking', 'content[].citations[].char_location']
"""

from __future__ import annotations

from urllib.parse import quote

from gateway.canonical.model import AnswerWire, ChatResponse

__all__ = ["answer_drops"]

_REASONING_PLACES = {"anthropic": "content[]", "responses": "output[]", "openai": "message"}
_CALL_PLACES = {
    "anthropic": "content[].tool_use",
    "responses": "output[].function_call",
    "openai": "message.tool_calls[]",
}
# Top-level members each wire's client can be given from another wire's answer.
_SHARED_FIELDS = {
    ("openai", "responses"): frozenset({"service_tier"}),
    ("responses", "openai"): frozenset({"service_tier"}),
}


def _name(place: str, key: str) -> str:
    return f"{place}.{quote(key[:64], safe='-_.')}"


def answer_drops(response: ChatResponse, wire: AnswerWire) -> list[str]:
    """The names of what a client of ``wire`` does not get of ``response``, in order."""
    # A list, not a generator: no frame of its own, and an answer nearly always drops none.
    out: list[str] = []
    for r in response.reasoning:
        if r.wire != wire:
            out.append(_name(_REASONING_PLACES[r.wire], str(r.raw.get("type"))))
    for item in response.items:
        if item.wire != wire:
            out.append(item.notice)
    for c in response.citations:
        # A web citation becomes the other OpenAI wire's url_citation; Anthropic's need an
        # encrypted index no other wire has.
        if c.wire != wire and (wire == "anthropic" or c.link is None):
            out.append(c.notice)
    for call in response.tool_calls:
        if call.members is not None and call.members.wire != wire:
            place = _CALL_PLACES[call.members.wire]
            out.extend(_name(place, k) for k in call.members.fields)
    usage = response.usage.kept
    if usage is not None and usage.wire != wire:
        out.extend(_name("usage", k) for k in usage.fields)
    if response.logprobs is not None and wire == "anthropic":
        out.append("logprobs")
    kept = response.passthrough
    if kept is None or kept.wire == wire:
        return out
    shared = _SHARED_FIELDS.get((kept.wire, wire), frozenset())
    # A kept stop reason (pause_turn) is translated to the finish reason, not dropped; a
    # Responses upstream's other members echo the request (the request side names those).
    answer = (
        kept.response
        if kept.wire != "responses"
        else {k: v for k, v in kept.response.items() if k == "service_tier"}
    )
    out.extend(k for k in answer if k not in shared and k != "stop_reason")
    # Chat message annotations are citations, named above when they cannot be said.
    out.extend(_name("message", k) for k in kept.message if k != "annotations")
    seen = {k for m in kept.messages for k in m}
    out.extend(_name("output[].message", k) for k in sorted(seen))
    return out
