"""A captured turn's text, for the capture line (``tbconsole.record.capturefile`` documents the fields):
the request's messages that are new since the trial's previous captured turn, and the reply as
the renderer parsed it. The console builds live transcripts from it; training never reads it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tinker_cookbook.renderers.base import Message

from tbconsole.proxy.chat import ChatReply
from tbconsole.record.capturefile import clip


def _text(value: str, limit: int | None = None) -> str:
    """Clipped, and writable as UTF-8: a lone surrogate from a client's JSON becomes U+FFFD."""
    value = clip(value) if limit is None else clip(value, limit)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return value


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else str(content)
    parts = []
    for part in content:
        if not isinstance(part, dict):
            parts.append(str(part))
        elif part.get("type") == "text":
            parts.append(str(part.get("text") or ""))
        elif part.get("type") == "thinking":
            parts.append(str(part.get("thinking") or ""))
        else:
            parts.append(f"[{part.get('type', '?')}]")
    return "\n".join(parts)


def _message_view(message: Message) -> dict[str, Any]:
    view: dict[str, Any] = {"role": message["role"], "content": _text(_content_text(message.get("content")))}
    calls = message.get("tool_calls") or []
    if calls:
        view["tool_calls"] = [_call_view(c) for c in calls]
    for key in ("name", "tool_call_id"):
        if message.get(key):
            view[key] = str(message[key])[:200]
    return view


def _call_view(call: Any) -> dict[str, str]:
    function = getattr(call, "function", None)
    if function is None:  # not the cookbook's ToolCall: shown as it is, never an error
        return {"name": "?", "arguments": _text(str(call))}
    return {"name": str(function.name), "arguments": _text(str(function.arguments))}


def _fingerprint(message: Message) -> tuple[str, int, str]:
    """Cheap identity of a message: enough to tell whether a request extends the previous one."""
    text = _content_text(message.get("content"))
    return (str(message["role"]), len(text), text[:64])


@dataclass
class ConversationCursor:
    """Where the trial's previous captured request ended, to find what a request adds."""

    seen: int = 0
    last: tuple[str, int, str] | None = None

    def new_messages(self, messages: list[Message]) -> dict[str, Any]:
        """``messages``/``echoed``/``restarted`` for this request's capture line."""
        extends = self.seen == 0 or (len(messages) >= self.seen and _fingerprint(messages[self.seen - 1]) == self.last)
        start = self.seen if extends else 0
        fresh = messages[start:]
        echoed = 0
        if start:  # the agent's own earlier replies come back in the request: the transcript has them
            while echoed < len(fresh) and fresh[echoed]["role"] == "assistant":
                echoed += 1
        self.seen = len(messages)
        self.last = _fingerprint(messages[-1]) if messages else None
        view: dict[str, Any] = {"messages": [_message_view(m) for m in fresh[echoed:]]}
        if echoed:
            view["echoed"] = echoed
        if not extends:
            view["restarted"] = True
        return view


def reply_view(reply: ChatReply | None, raw_text: str, error: str | None) -> dict[str, Any]:
    """The ``reply`` field: the parsed reply, or the raw decode when the renderer could not parse it."""
    if reply is None:
        return {"text": _text(raw_text), "parse_error": (error or "unparseable")[:500]}
    view: dict[str, Any] = {"text": _text(reply.text)}
    if reply.thinking:
        view["reasoning"] = _text(reply.thinking)
    if reply.tool_calls:
        view["tool_calls"] = [{"name": c.name, "arguments": _text(c.arguments)} for c in reply.tool_calls]
    return view
