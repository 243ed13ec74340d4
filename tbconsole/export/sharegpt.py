"""The ShareGPT record of one trial: the trial's facts, then ``conversations``, a list of
``{"from", "value"}`` turns (``from``: system, human, gpt, tool; a role the agent used beyond
those keeps its own name).

A turn carries what else its message held: ``reasoning`` (the reply's thinking), ``tool_calls``
(``[{"name", "arguments"}]``, arguments as the JSON text the model wrote), ``name`` and
``tool_call_id`` (a tool result's), ``parse_error`` (a reply the renderer could not parse: its
value is the raw decode). A sampled reply carries ``turn``, the captured turn it is; with tokens,
also ``token_ids`` and ``logprobs``, exactly as sampled. ``copied``: history a rewritten request
carried again; ``decoded``: text decoded from tokens (``conversation``).
"""

from __future__ import annotations

from typing import Any

from tbconsole.export.conversation import Message

FROM = {"system": "system", "user": "human", "assistant": "gpt", "tool": "tool"}


def _turn(m: Message, tokens: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"from": FROM.get(m.role, m.role), "value": m.content}
    if m.reasoning:
        out["reasoning"] = m.reasoning
    if m.tool_calls:
        out["tool_calls"] = [{"name": c.name, "arguments": c.arguments} for c in m.tool_calls]
    if m.name is not None:
        out["name"] = m.name
    if m.tool_call_id is not None:
        out["tool_call_id"] = m.tool_call_id
    if m.parse_error:
        out["parse_error"] = m.parse_error
    if m.copied:
        out["copied"] = True
    if m.decoded:
        out["decoded"] = True
    if m.sampled is not None:
        out["turn"] = m.sampled.turn
        if tokens:
            out["token_ids"] = list(m.sampled.output)
            out["logprobs"] = list(m.sampled.logprobs)
    return out


def sharegpt_record(facts: dict[str, Any], messages: list[Message], *, tokens: bool = False) -> dict[str, Any]:
    return {**facts, "conversations": [_turn(m, tokens) for m in messages]}
