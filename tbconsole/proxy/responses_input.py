"""OpenAI Responses requests → ``ChatRequest`` (the answer is ``responses_api``'s).

The API Codex CLI speaks (``POST {base_url}/responses``, base URL ``{proxy_url}/v1``). The proxy
is stateless: every request carries the whole conversation in ``input``, nothing is stored.

Accepted and used:

* ``instructions`` (a string) and ``input`` (a string, or a list of items): ``message`` items
  (also without ``type``) of roles system/developer (→ system), user and assistant, with string
  content or ``input_text``/``output_text``/``refusal`` parts; ``function_call`` items
  (``call_id``, ``name``, ``arguments``) and ``function_call_output`` items (``call_id``,
  ``output``: a string or text parts); ``reasoning`` items (their ``content`` reasoning text,
  else their ``summary`` texts, become the renderer's thinking). The instructions and the
  system/developer messages that open the input make one system prompt (joined by blank
  lines): the chat templates expect a single one, first. Consecutive assistant-side items
  (reasoning, one message, its function calls) make one assistant turn.
* ``tools``: function tools in the Responses API's flat shape (``{"type": "function", "name",
  "description", "parameters", "strict"}``). Every other tool type (``web_search``, which Codex
  always sends, ``file_search``, ``computer_use_preview``, ``custom``, ``mcp``, ``local_shell``…)
  is dropped, not refused: only OpenAI's servers run them, and a chat template cannot offer them.
* ``tool_choice``: "auto" (default); "none" renders without tools (a call the model writes anyway
  comes back as text); ``allowed_tools`` with mode "auto" offers the listed function tools.
  "required", a named function or custom tool, a hosted tool, or ``allowed_tools`` with mode
  "required" are refused (400): the policy samples freely and cannot be made to call a tool.
* ``max_output_tokens``, ``temperature``, ``top_p``, ``stream``.
* Echoed in the answer, otherwise without effect: ``metadata``, ``parallel_tool_calls`` (the
  policy may write several calls either way), ``store`` (true or false: nothing is stored),
  ``reasoning`` (the policy reasons as it does), ``text`` (format "text"; ``verbosity`` is
  ignored), ``truncation`` ("disabled" or "auto": the proxy never drops input, a conversation
  over the trial's window is refused as context_length_exceeded either way), ``user``,
  ``prompt_cache_key``, ``include`` (``reasoning.encrypted_content``: reasoning items carry
  ``encrypted_content: null``; their text travels in the clear).
* Ignored, like any unknown field: ``service_tier``, ``safety_identifier``,
  ``prompt_cache_retention``, ``stream_options``, ``top_logprobs``, ``max_tool_calls``.

Refused (400, OpenAI's error shape): ``previous_response_id`` and ``conversation`` (stateless:
send the whole conversation), ``item_reference`` items, ``background: true``, stored
``prompt`` templates, ``text.format`` other than "text" (no constrained decoding), images, files
and audio (the policy is text-only), and calls/outputs of non-function tools (``custom_tool_call``,
``local_shell_call``, ``computer_call``…: this proxy never offers those tools). Records of hosted
tools in the input (``web_search_call``, ``file_search_call``, ``mcp_call``…) are skipped.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, model_validator
from tinker_cookbook.renderers.base import Renderer, ToolSpec

from tbconsole.proxy.chat import ChatRequest, ConversionCache, convert_all, with_tools
from tbconsole.proxy.errors import bad_request
from tbconsole.proxy.responses_items import STATELESS, convert, units
from tbconsole.proxy.tools import FunctionSpec, allowed_tools, forced_tool_choice, plain_tool_choice
from tbconsole.proxy.validation import (
    Flag,
    MaxTokens,
    Object,
    Present,
    Temperature,
    TopP,
    Typed,
    WireModel,
    invalid,
    literal,
    parse,
    refused,
    string_or_array,
)

FORCED_TOOL_TYPES = {
    "function",
    "custom",
    "mcp",
    "file_search",
    "web_search",
    "web_search_preview",
    "computer_use_preview",
    "computer",
    "image_generation",
    "code_interpreter",
    "local_shell",
    "shell",
    "apply_patch",
}


# -- the body ------------------------------------------------------------------------------------


def _stateless(value: Any) -> Any:
    if value is not None:
        raise invalid(f" is not supported: {STATELESS}")
    return value


def _foreground(value: bool) -> bool:
    if value:
        raise invalid(" responses are not supported: this proxy answers in the request")
    return value


def _no_prompt(value: Any) -> Any:
    if value is not None:
        raise refused("stored prompt templates ('prompt') are not supported: send 'instructions' and 'input'")
    return value


def _items(value: Any) -> Any:
    if isinstance(value, list) and not value:
        raise invalid(" must not be empty")
    return value


def _strings(value: Any) -> Any:
    if value is not None and not (isinstance(value, list) and all(isinstance(x, str) for x in value)):
        raise invalid(" must be an array of strings")
    return value


def _text_format(value: dict[str, Any] | None) -> dict[str, Any] | None:
    kind = None if value is None else value.get("type")
    if value is not None and kind != "text":
        raise invalid(
            f" type {str(kind)[:40]!r} is not supported by this proxy: the policy samples freely (no "
            "constrained decoding); send {'type': 'text'}",
            param="text.format",
        )
    return value


class _TextConfig(WireModel):
    format: Annotated[Object | None, AfterValidator(_text_format)] = None
    verbosity: str | None = None  # echoed, without effect

    def echo(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": {"type": "text"}}
        if self.verbosity is not None:
            out["verbosity"] = self.verbosity
        return out


class _Body(WireModel):
    previous_response_id: Annotated[Any, AfterValidator(_stateless)] = None
    conversation: Annotated[Any, AfterValidator(_stateless)] = None
    background: Annotated[Flag, AfterValidator(_foreground)] = False
    prompt: Annotated[Any, AfterValidator(_no_prompt)] = None
    model: str | None = None
    input: Annotated[Any, Present, string_or_array("input items"), AfterValidator(_items)]
    instructions: str | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None
    include: Annotated[Any, AfterValidator(_strings)] = None  # reasoning.encrypted_content: echoed as null
    truncation: Annotated[Any, literal("auto", "disabled")] | None = None
    parallel_tool_calls: bool | None = None
    store: bool | None = None
    max_output_tokens: MaxTokens = None
    metadata: Object | None = None
    top_p: TopP = None
    reasoning: Object | None = None
    text: _TextConfig | None = None
    user: str | None = None
    prompt_cache_key: str | None = None
    temperature: Temperature = None
    stream: Flag = False


# -- tools ---------------------------------------------------------------------------------------


class _FunctionTool(FunctionSpec):
    strict: bool | None = None  # echoed (default true), without effect

    @model_validator(mode="before")
    @classmethod
    def _flat(cls, data: Any) -> Any:
        if isinstance(data, dict) and "name" not in data and isinstance(data.get("function"), dict):
            raise invalid(
                ": Responses function tools are flat: {'type': 'function', 'name', 'description', 'parameters'}"
            )
        return data


def _tools(raws: list[Any]) -> tuple[list[ToolSpec], list[dict]]:
    """``(specs, echo)``: the function tools, as the renderer takes them and as the answer echoes them."""
    specs, echo = [], []
    for j, raw in enumerate(raws):
        where = f"tools[{j}]"
        if parse(Typed, raw, where).type != "function":
            continue  # web_search, file_search, custom…: not callable through a chat template
        tool = parse(_FunctionTool, raw, where)
        spec = tool.spec()
        specs.append(spec)
        echo.append(
            {
                "type": "function",
                "name": spec["name"],
                "description": tool.description,
                "parameters": spec["parameters"],
                "strict": tool.strict if tool.strict is not None else True,
            }
        )
    return specs, echo


class _Choice(WireModel):
    type: str
    name: Any = None


class _NamedTool(WireModel):
    type: Any = None
    name: Any = None


class _AllowedTools(WireModel):
    mode: Annotated[Any, literal("auto", "required")]
    tools: list[_NamedTool]


def tool_choice(value: Any, tools: list[ToolSpec]) -> tuple[str, list[ToolSpec]]:
    """``(choice, tools to offer)`` for a Responses ``tool_choice``."""
    plain = plain_tool_choice(value, tools)
    if plain is not None:
        return plain
    choice = parse(_Choice, value, "tool_choice")
    if choice.type == "allowed_tools":
        spec = parse(_AllowedTools, value, "tool_choice")
        if spec.mode == "required":
            raise forced_tool_choice("'allowed_tools' with mode 'required'")
        return "auto", allowed_tools(tools, [tool.name for tool in spec.tools if tool.type == "function"])
    if choice.type in FORCED_TOOL_TYPES:
        name = choice.name
        what = f"the {choice.type} tool {name[:60]!r}" if isinstance(name, str) else f"the {choice.type} tool"
        raise forced_tool_choice(f"forcing {what}")
    raise bad_request("'tool_choice.type' must be 'function', 'allowed_tools' or a hosted tool type", "tool_choice")


# -- the request ---------------------------------------------------------------------------------


def parse_request(body: Any, renderer: Renderer, cache: ConversionCache | None = None) -> ChatRequest:
    request = parse(_Body, body)
    items = (
        [{"type": "message", "role": "user", "content": request.input}]
        if isinstance(request.input, str)
        else request.input
    )
    messages = convert_all(units(items, request.instructions), convert, cache)
    specs, echo_tools = _tools(request.tools or [])
    choice, offered = tool_choice(request.tool_choice, specs)
    extra = {
        "instructions": request.instructions,
        "metadata": request.metadata or {},
        "parallel_tool_calls": True if request.parallel_tool_calls is None else request.parallel_tool_calls,
        "tool_choice": request.tool_choice if request.tool_choice is not None else "auto",
        "tools": echo_tools,
        "top_p": request.top_p,
        "max_output_tokens": request.max_output_tokens,
        "store": True if request.store is None else request.store,
        "reasoning": request.reasoning or {"effort": None, "summary": None},
        "text": (request.text or _TextConfig()).echo(),
        "truncation": request.truncation or "disabled",
        "user": request.user,
        "prompt_cache_key": request.prompt_cache_key,
    }
    return ChatRequest(
        api="responses",
        model=request.model or "policy",
        messages=with_tools(renderer, messages, offered, cache),
        max_tokens=request.max_output_tokens,
        temperature=request.temperature,
        top_p=request.top_p,
        stream=request.stream,
        tool_choice=choice,
        extra=extra,
    )
