"""The sampled tokens, parsed back into the assistant's reply with the renderer's own parser.

Client stop strings (every API): a sample that stopped on one of them is answered with the text
cut before the first occurrence of the matched string (as the APIs do; the captured tokens keep
it), and ``ChatReply.stop_sequence`` names it (Anthropic's ``stop_reason: "stop_sequence"``).
``tool_choice`` "none": a call the model writes anyway comes back as text, one JSON object
``{"name", "arguments"}`` a line, so a client that ruled tools out never receives a call.
"""

from __future__ import annotations

import json

from tinker_cookbook.renderers.base import Message, Renderer

from tbconsole.proxy.chat import ChatReply, ToolCallOut, new_id


def _end_token(renderer: Renderer) -> int | None:
    stops = renderer.get_stop_sequences()
    if stops and all(isinstance(s, int) for s in stops):
        return int(stops[0])
    return None


def parse_reply(
    renderer: Renderer,
    tokens: list[int],
    stop_reason: str,
    prompt_tokens: int,
    tool_id_prefix: str,
    *,
    stops: list[str] | tuple = (),
    tools_offered: bool = True,
) -> ChatReply:
    """Sampled tokens → reply, with the renderer's own parser.

    A turn that did not end on the renderer's end-of-message token (a length stop, or a
    request stop string) is parsed as if it had, so the client still gets thinking, text and any
    complete tool calls split out; ``finish`` says ``length`` for a length stop. ``stops``: the
    client's stop strings; a sample that stopped on one is cut before it (``stop_sequence``
    names it). ``tools_offered=False`` (``tool_choice`` "none"): calls come back as text. Raises
    whatever the renderer raises when the tokens cannot be parsed at all."""
    end = _end_token(renderer)
    parse_tokens = list(tokens)
    if end is not None and end not in parse_tokens:
        parse_tokens.append(end)
    message, _termination = renderer.parse_response(parse_tokens)
    thinking, text = _thinking_and_text(message)
    calls = [
        ToolCallOut(id=tc.id or new_id(tool_id_prefix), name=tc.function.name, arguments=tc.function.arguments)
        for tc in message.get("tool_calls", []) or []
    ]
    if calls and not tools_offered:
        # The model was not offered tools but wrote a call anyway: the client ruled calls out.
        text = _with_calls_as_text(text, calls)
        calls = []
    matched = None
    if stops and stop_reason != "length" and (end is None or end not in tokens):
        matched = matched_stop(str(renderer.tokenizer.decode(list(tokens))), stops, _renderer_stop_strings(renderer))
        if matched is not None:
            thinking, text, calls = _cut_before(matched, thinking, text, calls)
    if stop_reason == "length":
        finish = "length"
    elif calls:
        finish = "tool_calls"
    else:
        finish = "stop"
    return ChatReply(
        thinking=thinking,
        text=text,
        tool_calls=calls,
        finish=finish,
        prompt_tokens=prompt_tokens,
        output_tokens=len(tokens),
        stop_sequence=matched if finish == "stop" else None,
    )


def _thinking_and_text(message: Message) -> tuple[str, str]:
    """The parsed message's thinking and its text, tool calls the parser could not read
    included in the text as written (the agent's own format error handling is the training
    signal)."""
    thinking: list[str] = []
    text: list[str] = []
    content = message.get("content", "")
    if isinstance(content, str):
        text.append(content)
    else:
        for part in content:
            if part["type"] == "thinking":
                thinking.append(part["thinking"])
            elif part["type"] == "text":
                text.append(part["text"])
    for unparsed in message.get("unparsed_tool_calls", []) or []:
        text.append(unparsed.raw_text)
    return "".join(thinking), "".join(text)


def _with_calls_as_text(text: str, calls: list[ToolCallOut]) -> str:
    """``text`` with the calls after it, one JSON object ``{"name", "arguments"}`` a line."""
    written = "\n".join(json.dumps({"name": c.name, "arguments": c.arguments}, ensure_ascii=False) for c in calls)
    return text + ("\n" if text.strip() else "") + written


def _cut_before(matched: str, thinking: str, text: str, calls: list[ToolCallOut]) -> tuple[str, str, list[ToolCallOut]]:
    """The reply cut before the stop string it stopped on: within the thinking (then no text
    or calls follow it) unless the text holds it too, else within the text."""
    if matched in thinking and matched not in text:
        return thinking[: thinking.index(matched)], "", []
    if matched in text:
        return thinking, text[: text.index(matched)], calls
    return thinking, text, calls


def _renderer_stop_strings(renderer: Renderer) -> list[str]:
    out = []
    for stop in renderer.get_stop_sequences():
        if isinstance(stop, str):
            out.append(stop)
        else:
            try:
                out.append(str(renderer.tokenizer.decode([stop])))
            except Exception:  # noqa: BLE001 - a token the tokenizer cannot show: no string to match
                continue
    return [s for s in out if s]


def matched_stop(decoded: str, stops: list[str] | tuple, renderer_stops: list[str]) -> str | None:
    """Which of the client's ``stops`` ended ``decoded`` (the sampled text): the stop string whose
    first occurrence ends earliest (the sampler halts as soon as one appears), or ``None`` when
    that is one of the renderer's own (the model ended its turn) or nothing matches."""
    best: tuple[tuple[int, int], str] | None = None
    for stop in (*renderer_stops, *stops):
        at = decoded.find(stop)
        if at >= 0:
            key = (at + len(stop), at)
            if best is None or key < best[0]:
                best = (key, stop)
    if best is None or best[1] in renderer_stops:
        return None
    return best[1]
