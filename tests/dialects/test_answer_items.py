"""Answer parts the gateway does not interpret: Responses output items of hosted tools
(``web_search_call``, ``file_search_call``, ``code_interpreter_call``,
``image_generation_call``, ``mcp_call``, ``local_shell_call``) and custom tools
(``custom_tool_call``), chat ``custom`` tool calls, Anthropic server tools' blocks
(``server_tool_use``, ``web_search_tool_result``). On the same wire they reach the client
as the upstream sent them, in their place, streamed with their own events (renumbered),
while strict function calls beside them are still held and validated; a function call's
``namespace`` is kept. Across wires they cannot be represented: a non-streamed answer
names them in ``x-syntic-dropped``, a stream leaves them out; never a 502. Every 200 body
and stream event is validated against the SDK's types (chat custom-call chunks excepted:
the SDK's chunk type has no custom member)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletionChunk

from tests.support.dialect_clients import DIALECTS, Dialect, ask, strict_output
from tests.support.gateway_proc import GatewayProcess
from tests.support.responses_wire import reasoning_item
from tests.support.scripted_upstream import (
    Call,
    Item,
    Raw,
    RawStream,
    ReasoningItem,
    Reply,
    ScriptedUpstream,
    Thinking,
)
from tests.support.three_wires import start_three_wire_gateway

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"order": {"type": "string", "pattern": "^[0-9]+$"}},
    "required": ["order"],
    "additionalProperties": False,
}
BAD, GOOD = '{"order": "A1"}', '{"order": "41"}'
REASONING = (ReasoningItem("rs_up_1", ("Looking it up.",), encrypted_content="gAAAAB-x"),)

WEB_SEARCH: dict[str, Any] = {
    "type": "web_search_call",
    "id": "ws_up_1",
    "status": "completed",
    "action": {"type": "search", "query": "order 41 status"},
}
# Each hosted or custom item with the events the API streams for it between added and done.
RESPONSES_ITEMS: list[tuple[dict[str, Any], list[str]]] = [
    (
        WEB_SEARCH,
        [
            "response.web_search_call.in_progress",
            "response.web_search_call.searching",
            "response.web_search_call.completed",
        ],
    ),
    (
        {
            "type": "file_search_call",
            "id": "fs_up_1",
            "status": "completed",
            "queries": ["refund policy"],
            "results": [
                {
                    "file_id": "file_1",
                    "filename": "policy.md",
                    "score": 0.9,
                    "text": "Refunds within 30 days.",
                }
            ],
        },
        [
            "response.file_search_call.in_progress",
            "response.file_search_call.searching",
            "response.file_search_call.completed",
        ],
    ),
    (
        {
            "type": "code_interpreter_call",
            "id": "ci_up_1",
            "status": "completed",
            "code": "print(6 * 7)",
            "container_id": "cntr_1",
            "outputs": [{"type": "logs", "logs": "42\n"}],
        },
        [
            "response.code_interpreter_call.in_progress",
            "response.code_interpreter_call_code.delta",
            "response.code_interpreter_call_code.done",
            "response.code_interpreter_call.interpreting",
            "response.code_interpreter_call.completed",
        ],
    ),
    (
        {
            "type": "image_generation_call",
            "id": "ig_up_1",
            "status": "completed",
            "result": "iVBORw0KGgo=",
        },
        [
            "response.image_generation_call.in_progress",
            "response.image_generation_call.generating",
            "response.image_generation_call.completed",
        ],
    ),
    (
        {
            "type": "mcp_call",
            "id": "mcp_up_1",
            "name": "lookup_order",
            "server_label": "shop",
            "arguments": '{"order": "41"}',
            "output": "shipped",
            "status": "completed",
        },
        [
            "response.mcp_call.in_progress",
            "response.mcp_call_arguments.delta",
            "response.mcp_call_arguments.done",
            "response.mcp_call.completed",
        ],
    ),
    (
        {
            "type": "local_shell_call",
            "id": "lsh_up_1",
            "call_id": "call_sh_1",
            "status": "completed",
            "action": {"type": "exec", "command": ["ls"], "env": {}},
        },
        [],
    ),
    (
        {
            "type": "custom_tool_call",
            "id": "ctc_up_1",
            "call_id": "call_ct_1",
            "name": "apply_patch",
            "input": "*** Begin Patch\n*** End Patch\n",
        },
        ["response.custom_tool_call_input.delta", "response.custom_tool_call_input.done"],
    ),
]
CUSTOM_ITEM = RESPONSES_ITEMS[-1][0]
CHAT_CUSTOM: dict[str, Any] = {
    "id": "call_ct_1",
    "type": "custom",
    "custom": {"name": "apply_patch", "input": "*** Begin Patch\n*** End Patch\n"},
}
SERVER_TOOL_USE: dict[str, Any] = {
    "type": "server_tool_use",
    "id": "srvtoolu_1",
    "name": "web_search",
    "input": {"query": "order 41 status"},
}
SEARCH_RESULT: dict[str, Any] = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": [
        {
            "type": "web_search_result",
            "url": "https://shop.example/41",
            "title": "Order 41",
            "encrypted_content": "EqgfCioI",
            "page_age": None,
        }
    ],
}
NAMESPACE: dict[str, Any] = {
    "type": "namespace",
    "name": "crm",
    "description": "Customer records",
    "tools": [{"type": "function", "name": "lookup", "parameters": SCHEMA}],
}


@pytest.fixture(scope="module")
def gw(
    scripted_upstream_server: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    gw = start_three_wire_gateway(scripted_upstream_server, tmp_path_factory.mktemp("answer-items"))
    yield gw
    gw.stop()


def queue(upstream: ScriptedUpstream, stream: bool, *steps: Reply) -> None:
    """The steps once, twice for a stream (``ask`` streams raw, then through the SDK)."""
    for _ in range(2 if stream else 1):
        upstream.queue(*steps)


def output_of(seen: Any, stream: bool) -> list[dict[str, Any]]:
    """The response's output items as JSON: the body's, or the ``response.completed``
    event's."""
    if not stream:
        return list(seen.raw["output"])
    [done] = [e for e in seen.events if e["type"] == "response.completed"]
    return list(done["response"]["output"])


def strict_tool(dialect: Dialect) -> dict[str, Any]:
    if dialect == "chat":
        return {
            "type": "function",
            "function": {"name": "lookup", "parameters": SCHEMA, "strict": True},
        }
    if dialect == "responses":
        return {"type": "function", "name": "lookup", "parameters": SCHEMA}
    return {"name": "lookup", "input_schema": SCHEMA, "strict": True}


# -- Responses, Responses wire ---------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(
    ("item", "progress"), RESPONSES_ITEMS, ids=[i["type"] for i, _ in RESPONSES_ITEMS]
)
def test_responses_items_reach_the_client_in_their_place(
    gw: GatewayProcess,
    upstream: ScriptedUpstream,
    item: dict[str, Any],
    progress: list[str],
    stream: bool,
) -> None:
    queue(
        upstream,
        stream,
        Reply(
            content="Order 41 shipped.", reasoning=REASONING, items=(Item(item, at=1),), fragment=5
        ),
    )
    seen = ask(gw, "responses", "rs", stream=stream)
    output = output_of(seen, stream)
    assert [o["type"] for o in output] == ["reasoning", item["type"], "message"]
    assert output[1] == item  # as the upstream sent it
    assert [o.type for o in seen.final.output] == ["reasoning", item["type"], "message"]
    assert seen.final.output_text == "Order 41 shipped."
    if not stream:
        return
    own = [
        e
        for e in seen.events
        if e.get("item_id") == item["id"] or e.get("item", {}).get("id") == item["id"]
    ]
    kinds = [e["type"] for e in own]
    assert [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k] == [
        "response.output_item.added",
        *progress,
        "response.output_item.done",
    ]  # deltas as one
    assert {e["output_index"] for e in own} == {1}
    text = "".join(e["delta"] for e in own if e["type"].endswith(".delta"))
    assert text == str(item.get("input") or item.get("code") or item.get("arguments") or "")
    added = [e for e in seen.events if e["type"] == "response.output_item.added"]
    assert [(e["output_index"], e["item"]["type"]) for e in added] == [
        (0, "reasoning"),
        (1, item["type"]),
        (2, "message"),
    ]
    numbers = [e["sequence_number"] for e in seen.events]
    assert numbers == list(range(len(numbers)))


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_strict_call_beside_hosted_items_is_still_held_and_corrected(
    gw: GatewayProcess, upstream: ScriptedUpstream, stream: bool
) -> None:
    queue(
        upstream,
        stream,
        Reply(items=(Item(WEB_SEARCH, at=0),), tool_calls=[Call("lookup", BAD)]),
        Reply(tool_calls=[Call("lookup", GOOD)]),
    )
    seen = ask(
        gw,
        "responses",
        "rs",
        stream=stream,
        extra={"tools": [{"type": "web_search"}, strict_tool("responses")]},
    )
    output = output_of(seen, stream)
    assert [o["type"] for o in output] == ["web_search_call", "function_call"]
    assert output[0] == WEB_SEARCH and output[1]["arguments"] == GOOD
    assert seen.final.output[1].arguments == GOOD
    if stream:
        assert "A1" not in json.dumps(seen.events)  # the invalid arguments never left
        indexes = [
            e["output_index"] for e in seen.events if e["type"] == "response.output_item.added"
        ]
        assert indexes == [0, 1]
    assert upstream.requests[0].body["tools"][0] == {"type": "web_search"}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_custom_tool_call_is_a_tool_turn_under_a_strict_output(
    gw: GatewayProcess, upstream: ScriptedUpstream, stream: bool
) -> None:
    """A custom call is not text: the turn is a tool turn, as with a function call, so a
    strict ``text.format`` does not send it to correction."""
    queue(upstream, stream, Reply(items=(Item(CUSTOM_ITEM),)))
    seen = ask(
        gw,
        "responses",
        "rs",
        stream=stream,
        extra={
            **strict_output("responses"),
            "tools": [{"type": "custom", "name": "apply_patch", "description": "Edit files"}],
        },
    )
    assert output_of(seen, stream) == [CUSTOM_ITEM]
    assert seen.final.output[0].input == CUSTOM_ITEM["input"]
    assert len(upstream.requests) == (2 if stream else 1)  # no correction call


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_namespaced_call_keeps_its_namespace_and_is_enforced_inside_it(
    gw: GatewayProcess, upstream: ScriptedUpstream, stream: bool
) -> None:
    queue(
        upstream,
        stream,
        Reply(tool_calls=[Call("lookup", BAD, namespace="crm")]),
        Reply(tool_calls=[Call("lookup", GOOD, namespace="crm")]),
    )
    seen = ask(gw, "responses", "rs", stream=stream, extra={"tools": [NAMESPACE]})
    [call] = output_of(seen, stream)
    assert (call["type"], call["namespace"], call["name"], call["arguments"]) == (
        "function_call",
        "crm",
        "lookup",
        GOOD,
    )
    assert seen.final.output[0].namespace == "crm"
    # The correction replays the bad call inside its namespace.
    replayed = [i for i in upstream.requests[1].body["input"] if i["type"] == "function_call"]
    assert [(i["namespace"], i["arguments"]) for i in replayed] == [("crm", BAD)]
    if stream:
        added = [e["item"] for e in seen.events if e["type"] == "response.output_item.added"]
        assert [i.get("namespace") for i in added] == ["crm"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("model", ["oa", "an"])
def test_a_namespaced_call_names_its_namespace_whichever_wire_answered(
    gw: GatewayProcess, upstream: ScriptedUpstream, model: str, stream: bool
) -> None:
    """Another wire got the namespace's tools flattened; the Responses client still gets
    the call in its namespace."""
    queue(upstream, stream, Reply(tool_calls=[Call("lookup", GOOD)]))
    seen = ask(gw, "responses", model, stream=stream, extra={"tools": [NAMESPACE]})
    [call] = output_of(seen, stream)
    assert (call["namespace"], call["name"], json.loads(call["arguments"])) == (
        "crm",
        "lookup",
        {"order": "41"},
    )


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_interleaved_reasoning_stays_between_its_calls(
    gw: GatewayProcess, upstream: ScriptedUpstream, stream: bool
) -> None:
    second = reasoning_item(ReasoningItem("rs_up_2", ("Now the other.",)))
    calls = [Call("lookup", GOOD), Call("lookup", '{"order": "7"}')]
    queue(
        upstream, stream, Reply(reasoning=REASONING, items=(Item(second, at=2),), tool_calls=calls)
    )
    seen = ask(gw, "responses", "rs", stream=stream, extra={"tools": [strict_tool("responses")]})
    output = output_of(seen, stream)
    assert [
        (o["type"], o.get("id") if o["type"] == "reasoning" else o.get("arguments")) for o in output
    ] == [
        ("reasoning", "rs_up_1"),
        ("function_call", GOOD),
        ("reasoning", "rs_up_2"),
        ("function_call", '{"order": "7"}'),
    ]


def test_text_around_an_item_stays_in_two_messages(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    def message(mid: str, text: str) -> dict[str, Any]:
        return {
            "type": "message",
            "id": mid,
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }

    body = {
        "id": "resp_up",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "x",
        "output": [message("m1", "Searching. "), WEB_SEARCH, message("m2", "Order 41 shipped.")],
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
    }
    upstream.queue(Raw(json.dumps(body).encode()))
    seen = ask(gw, "responses", "rs", stream=False)
    output = seen.raw["output"]
    assert [o["type"] for o in output] == ["message", "web_search_call", "message"]
    assert [o["content"][0]["text"] for o in (output[0], output[2])] == [
        "Searching. ",
        "Order 41 shipped.",
    ]
    assert seen.final.output_text == "Searching. Order 41 shipped."


def test_a_continued_response_sends_its_items_back(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    """A stored response's hosted items are history: the next turn sends them to the
    Responses upstream in place."""
    upstream.queue(Reply(content="Shipped.", items=(Item(WEB_SEARCH),)), Reply(content="Ok."))
    with openai.OpenAI(
        base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0, timeout=20
    ) as client:
        first = client.responses.create(model="rs", input="Where is 41?", store=True)
        client.responses.create(model="rs", input="Thanks.", previous_response_id=first.id)
    items = upstream.requests[1].body["input"]
    assert [i.get("type", "message") for i in items] == [
        "message",
        "web_search_call",
        "message",
        "message",
    ]
    assert items[1] == WEB_SEARCH


def test_an_item_without_its_added_event_is_still_announced(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    """An upstream that sends an item only whole (``output_item.done``): the client gets
    ``added`` first, as the SDK's stream accumulator needs."""

    def event(kind: str, **data: Any) -> bytes:
        return b"data: " + json.dumps({"type": kind, **data}).encode() + b"\n\n"

    response = {
        "id": "resp_up",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "x",
        "output": [],
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
    }
    events = [
        event("response.created", response={**response, "status": "in_progress"}),
        event("response.output_item.done", output_index=0, item=WEB_SEARCH),
        event(
            "response.output_item.added",
            output_index=1,
            item={
                "type": "message",
                "id": "m",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            },
        ),
        event(
            "response.output_text.delta",
            item_id="m",
            output_index=1,
            content_index=0,
            delta="Shipped.",
        ),
        event("response.completed", response=response),
    ]
    upstream.queue(RawStream(events), RawStream(events))
    seen = ask(gw, "responses", "rs", stream=True)
    kinds = [
        (e["type"], e.get("output_index"))
        for e in seen.events
        if e["type"].startswith("response.output_item")
    ]
    assert kinds == [
        ("response.output_item.added", 0),
        ("response.output_item.done", 0),
        ("response.output_item.added", 1),
        ("response.output_item.done", 1),
    ]
    assert [o.type for o in seen.final.output] == ["web_search_call", "message"]


# -- chat completions, chat wire -------------------------------------------------------


def test_chat_custom_tool_calls_reach_the_client_in_their_place(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    """A ``type: "custom"`` call was a 502 (no ``function`` member); it is an answer."""
    upstream.queue(
        Reply(
            items=(Item(CHAT_CUSTOM),), tool_calls=[Call("lookup", BAD)], finish_reason="tool_calls"
        ),
        Reply(tool_calls=[Call("lookup", GOOD)]),
    )
    seen = ask(
        gw,
        "chat",
        "oa",
        stream=False,
        extra={
            "tools": [{"type": "custom", "custom": {"name": "apply_patch"}}, strict_tool("chat")]
        },
    )
    calls = seen.raw["choices"][0]["message"]["tool_calls"]
    assert calls[0] == CHAT_CUSTOM
    assert (calls[1]["type"], calls[1]["function"]["arguments"]) == ("function", GOOD)
    assert [c.type for c in seen.final.choices[0].message.tool_calls] == ["custom", "function"]
    assert seen.raw["choices"][0]["finish_reason"] == "tool_calls"


def test_chat_streamed_custom_calls_pass_as_sent_beside_held_strict_calls(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(
        Reply(
            items=(Item(CHAT_CUSTOM),),
            tool_calls=[Call("lookup", BAD)],
            finish_reason="tool_calls",
            fragment=6,
        ),
        Reply(tool_calls=[Call("lookup", GOOD)]),
    )
    tools = [{"type": "custom", "custom": {"name": "apply_patch"}}, strict_tool("chat")]
    with (
        openai.OpenAI(
            base_url=gw.base_url + "/v1", api_key=gw.api_key, max_retries=0, timeout=20
        ) as client,
        client.chat.completions.with_streaming_response.create(
            model="oa",
            messages=[{"role": "user", "content": "Patch it."}],
            stream=True,
            tools=tools,  # type: ignore[arg-type]
        ) as r,
    ):
        chunks = [
            json.loads(line[5:])
            for line in r.iter_lines()
            if line.startswith("data:") and line != "data: [DONE]"
        ]
    frags = [
        f for c in chunks if c["choices"] for f in c["choices"][0]["delta"].get("tool_calls") or ()
    ]
    custom = [f for f in frags if f["index"] == 0]
    assert custom[0] == {
        "index": 0,
        "id": "call_ct_1",
        "type": "custom",
        "custom": {"name": "apply_patch", "input": ""},
    }
    assert "".join(f["custom"]["input"] for f in custom) == CHAT_CUSTOM["custom"]["input"]
    function = [f for f in frags if f["index"] == 1]
    assert function[0]["function"]["name"] == "lookup"
    assert "".join(f["function"]["arguments"] for f in function) == GOOD
    for chunk in chunks:  # the SDK's chunk type has no custom member
        delta = chunk["choices"][0]["delta"] if chunk["choices"] else {}
        if all(f["index"] != 0 for f in delta.get("tool_calls") or ()):
            ChatCompletionChunk.model_validate(chunk)


# -- Messages, Anthropic wire ----------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_server_tool_blocks_reach_the_client_in_their_place(
    gw: GatewayProcess, upstream: ScriptedUpstream, stream: bool
) -> None:
    thought = Thinking("Search for it.", signature="EqQBCgIYAhIM")
    queue(
        upstream,
        stream,
        Reply(
            content="Order 41 shipped.",
            thinking=(thought,),
            items=(Item(SERVER_TOOL_USE, 1), Item(SEARCH_RESULT, 1)),
            fragment=6,
        ),
    )
    seen = ask(
        gw,
        "messages",
        "an",
        stream=stream,
        extra={"tools": [{"type": "web_search_20250305", "name": "web_search"}]},
    )
    content = [b.model_dump(mode="json") for b in seen.final.content]
    assert [b["type"] for b in content] == [
        "thinking",
        "server_tool_use",
        "web_search_tool_result",
        "text",
    ]
    assert {k: content[1][k] for k in SERVER_TOOL_USE} == SERVER_TOOL_USE
    assert content[2]["content"][0]["url"] == "https://shop.example/41"
    if stream:
        starts = [
            (e["index"], e["content_block"]["type"])
            for e in seen.events
            if e["type"] == "content_block_start"
        ]
        assert starts == [
            (0, "thinking"),
            (1, "server_tool_use"),
            (2, "web_search_tool_result"),
            (3, "text"),
        ]
        partial = [
            e["delta"]["partial_json"]
            for e in seen.events
            if e["type"] == "content_block_delta" and e["index"] == 1
        ]
        assert json.loads("".join(partial)) == SERVER_TOOL_USE["input"]
    else:
        assert seen.raw["content"][1:3] == [SERVER_TOOL_USE, SEARCH_RESULT]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_paused_server_tool_turn_stays_paused_in_its_container(
    gw: GatewayProcess, upstream: ScriptedUpstream, stream: bool
) -> None:
    container = {"id": "container_1", "expires_at": "2030-01-01T00:00:00Z"}
    queue(
        upstream,
        stream,
        Reply(items=(Item(SERVER_TOOL_USE),), finish_reason="pause_turn", container=container),
    )
    seen = ask(gw, "messages", "an", stream=stream)
    assert seen.final.stop_reason == "pause_turn"
    assert seen.final.container is not None and seen.final.container.id == "container_1"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_strict_tool_use_beside_server_blocks_is_still_held_and_corrected(
    gw: GatewayProcess, upstream: ScriptedUpstream, stream: bool
) -> None:
    queue(
        upstream,
        stream,
        Reply(
            items=(Item(SERVER_TOOL_USE), Item(SEARCH_RESULT)),
            tool_calls=[Call("lookup", BAD, id="toolu_1")],
        ),
        Reply(tool_calls=[Call("lookup", GOOD, id="toolu_2")]),
    )
    seen = ask(gw, "messages", "an", stream=stream, extra={"tools": [strict_tool("messages")]})
    content = seen.final.content
    assert [b.type for b in content] == ["server_tool_use", "web_search_tool_result", "tool_use"]
    assert (content[2].id, content[2].input) == ("toolu_1", {"order": "41"})
    assert seen.final.stop_reason == "tool_use"
    if stream:
        assert "A1" not in json.dumps(seen.events)


def test_text_around_server_blocks_stays_in_its_blocks(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    body = {
        "id": "msg_up",
        "type": "message",
        "role": "assistant",
        "model": "x",
        "content": [
            {"type": "text", "text": "Let me search. "},
            SERVER_TOOL_USE,
            SEARCH_RESULT,
            {"type": "text", "text": "Order 41 shipped."},
        ],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    upstream.queue(Raw(json.dumps(body).encode()))
    seen = ask(gw, "messages", "an", stream=False)
    assert [(b["type"], b.get("text")) for b in seen.raw["content"]] == [
        ("text", "Let me search. "),
        ("server_tool_use", None),
        ("web_search_tool_result", None),
        ("text", "Order 41 shipped."),
    ]


# -- across wires ----------------------------------------------------------------------

# Per upstream model: a reply carrying items, and the names x-syntic-dropped gives them.
CROSS: dict[str, tuple[Reply, list[str]]] = {
    "rs": (
        Reply(content="Order 41 shipped.", items=(Item(WEB_SEARCH), Item(CUSTOM_ITEM, 9))),
        ["output[].web_search_call", "output[].custom_tool_call"],
    ),
    "an": (
        Reply(content="Order 41 shipped.", items=(Item(SERVER_TOOL_USE), Item(SEARCH_RESULT))),
        ["content[].server_tool_use", "content[].web_search_tool_result"],
    ),
    "oa": (
        Reply(content="Order 41 shipped.", items=(Item(CHAT_CUSTOM),), finish_reason="stop"),
        ["message.tool_calls[].custom"],
    ),
}
SAME_WIRE = {"oa": "chat", "rs": "responses", "an": "messages"}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(
    ("model", "dialect"), [(m, d) for m in CROSS for d in DIALECTS if d != SAME_WIRE[m]]
)
def test_items_another_wire_cannot_carry_are_named_never_a_502(
    gw: GatewayProcess,
    upstream: ScriptedUpstream,
    model: str,
    dialect: Dialect,
    stream: bool,
) -> None:
    reply, names = CROSS[model]
    queue(upstream, stream, reply)
    seen = ask(gw, dialect, model, stream=stream)
    if dialect == "chat":
        message = seen.final.choices[0].message
        assert (message.content, message.tool_calls) == ("Order 41 shipped.", None)
    elif dialect == "responses":
        assert [o.type for o in seen.final.output] == ["message"]
        assert seen.final.output_text == "Order 41 shipped."
    else:
        assert [(b.type, b.text) for b in seen.final.content] == [("text", "Order 41 shipped.")]
    dropped = seen.headers.get("x-syntic-dropped", "")
    # A stream's headers went out before its items came: its drop is documented instead.
    assert dropped.split(",") == (names if not stream else [""])


@pytest.mark.parametrize("dialect", ["responses", "messages"])
def test_a_chat_answers_text_stays_before_its_calls_across_wires(
    gw: GatewayProcess, upstream: ScriptedUpstream, dialect: Dialect
) -> None:
    upstream.queue(
        Reply(content="Looking.", items=(Item(CHAT_CUSTOM),), tool_calls=[Call("lookup", GOOD)])
    )
    seen = ask(gw, dialect, "oa", stream=False, extra={"tools": [strict_tool(dialect)]})
    parts = seen.raw["output"] if dialect == "responses" else seen.raw["content"]
    assert [p["type"] for p in parts] == (
        ["message", "function_call"] if dialect == "responses" else ["text", "tool_use"]
    )
    assert seen.headers["x-syntic-dropped"] == "message.tool_calls[].custom"


def test_answer_drops_join_the_requests_in_one_header(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    upstream.queue(CROSS["rs"][0])
    seen = ask(gw, "chat", "rs", stream=False, extra={"seed": 7})
    assert seen.headers["x-syntic-dropped"].split(",") == ["seed", *CROSS["rs"][1]]


def test_an_upstreams_item_type_never_writes_a_header_of_its_own(
    gw: GatewayProcess, upstream: ScriptedUpstream
) -> None:
    """The dropped item's type is the upstream's string, and it goes into a header."""
    evil = {"type": "web_search_call\r\nx-injected: 1", "id": "ws_1", "status": "completed"}
    body = {
        "id": "resp_up",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "x",
        "output": [
            evil,
            {
                "type": "message",
                "id": "m",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Hi.", "annotations": []}],
            },
        ],
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
    }
    upstream.queue(Raw(json.dumps(body).encode()))
    seen = ask(gw, "chat", "rs", stream=False)
    assert "x-injected" not in seen.headers
    assert seen.headers["x-syntic-dropped"] == "output[].web_search_call%0D%0Ax-injected%3A%201"
    assert seen.final.choices[0].message.content == "Hi."
