"""Tools, as every API shares them: declarations, calls in the history, and ``tool_choice``.

``tool_choice``: "auto" (the default) offers the declared tools; "none" renders the
conversation *without* tool declarations (the model is not offered them; see ``reply`` for a
call it writes anyway); forcing a call ("required", Anthropic's "any", a named tool) is refused
with a 400 (``forced_tool_choice``): the policy samples freely and the proxy will not bend its
tokens. OpenAI's ``allowed_tools`` with mode "auto" offers the listed subset of the tools.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import AfterValidator
from tinker_cookbook.renderers.base import ToolCall, ToolSpec

from tbconsole.proxy.errors import ProxyError, bad_request
from tbconsole.proxy.validation import Name, Object, WireModel, invalid

_NO_PARAMETERS = {"type": "object", "properties": {}}


def _arguments(value: Any) -> str:
    """Call arguments: JSON text, or an object (written as JSON text); none is ``{}``."""
    if value is None:
        return "{}"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    if not isinstance(value, str):
        raise invalid(" must be a JSON string")
    return value


Arguments = Annotated[Any, AfterValidator(_arguments)]


class FunctionSpec(WireModel):
    """A function tool's declaration (OpenAI's ``function``, the Responses API's flat tool)."""

    name: Name
    description: str | None = None
    parameters: Object | None = None

    def spec(self) -> ToolSpec:
        return tool_spec(self.name, self.description, self.parameters)


def tool_spec(name: str, description: str | None, parameters: dict[str, Any] | None) -> ToolSpec:
    return ToolSpec(
        name=name, description=description or "", parameters=parameters if parameters is not None else _NO_PARAMETERS
    )


def tool_call(call_id: str | None, name: str, arguments: str) -> ToolCall:
    return ToolCall(id=call_id, function=ToolCall.FunctionBody(name=name, arguments=arguments))


def forced_tool_choice(what: str) -> ProxyError:
    """The refusal for a ``tool_choice`` that would force a call."""
    return bad_request(
        f"'tool_choice' {what} is not supported by this proxy: the policy samples freely, so it "
        "cannot be made to call a tool; send 'auto' (or 'none' to offer no tools)",
        "tool_choice",
    )


def plain_tool_choice(value: Any, tools: list[ToolSpec]) -> tuple[str, list[ToolSpec]] | None:
    """What both OpenAI APIs share of ``tool_choice``: ``(choice, tools to offer)`` for "auto"
    and "none", a 400 for "required" (the policy samples freely) or a value that is no object;
    ``None`` for an object, which each API reads in its own shape."""
    if value is None or value == "auto":
        return "auto", tools
    if value == "none":
        return "none", []
    if value == "required":
        raise forced_tool_choice("'required'")
    if not isinstance(value, dict):
        raise bad_request("'tool_choice' must be 'auto', 'none', 'required' or an object", "tool_choice")
    return None


def allowed_tools(tools: list[ToolSpec], names: list[Any]) -> list[ToolSpec]:
    """``tools`` restricted to ``names`` (each a declared tool's name)."""
    if not all(isinstance(n, str) for n in names):
        raise bad_request("'tool_choice' must list the allowed tools by name", "tool_choice")
    declared = {t["name"] for t in tools}
    unknown = [n for n in names if n not in declared]
    if unknown:
        raise bad_request(f"'tool_choice' names tools that are not declared: {unknown[:5]}", "tool_choice")
    keep = set(names)
    return [t for t in tools if t["name"] in keep]
