"""Request validation: the APIs' request shapes as pydantic models, their errors in our words.

Each API module describes its request body, and the objects inside it (a message, an input item,
a content part, a tool), as ``WireModel`` subclasses: strict JSON types (``"5"`` is no number,
``1`` no boolean; an integral float is an integer, JSON has one number type), unknown fields
ignored. ``parse(model, value, where)`` validates one object and turns its first problem into a
``ProxyError(400)`` that names the field the way the APIs do::

    'messages[2].content' must be a string or an array of content parts      param: messages[2]

``param`` is ``where`` (the object validated; for a body, the top-level field at fault). Nested
objects are parsed one by one where the converter reads them, so each error's ``param`` names
the object that was wrong, and unchanged messages of a long conversation are not validated again
(``ConversionCache``). pydantic's own wording never reaches a client: its error types map to the
phrases below, and validators here raise ``invalid``/``refused`` errors that carry our message.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_core import PydanticCustomError

from tbconsole.proxy.errors import ProxyError, bad_request

MAX_STOP_SEQUENCES = 16
_CUSTOM = "proxy"

# pydantic's error types, as the rest of a message that begins with the field's path.
_WORDS = {
    "missing": " is required",
    "string_type": " must be a string",
    "string_unicode": " must be a string",
    "bool_type": " must be a boolean",
    "int_type": " must be an integer",
    "int_parsing": " must be an integer",
    "int_from_float": " must be an integer",
    "float_type": " must be a number",
    "float_parsing": " must be a number",
    "finite_number": " must be finite",
    "dict_type": " must be an object",
    "model_type": " must be an object",
    "model_attributes_type": " must be an object",
    "list_type": " must be an array",
}


class WireModel(BaseModel):
    """A JSON object of a request: strict types, unknown fields ignored."""

    model_config = ConfigDict(strict=True, extra="ignore", protected_namespaces=())


def invalid(rest: str, *, at: str = "", param: str | None = None) -> PydanticCustomError:
    """For a validator: the value at fault, told as ``'<its path>[.at]'<rest>``."""
    return PydanticCustomError(_CUSTOM, "invalid", {"rest": rest, "at": at, "param": param})


def refused(message: str, *, param: str | None = None) -> PydanticCustomError:
    """For a validator: a value the proxy will not serve, told in a message of its own."""
    return PydanticCustomError(_CUSTOM, "refused", {"message": message, "param": param})


def parse[M: BaseModel](model: type[M], value: Any, where: str = "", param: str | None = None) -> M:
    """``value`` as ``model``, or a 400 for its first problem. ``where``: the path of ``value``
    in the request ("" for the body); ``param``: the error's ``param`` (default: ``where``)."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise _proxy_error(exc.errors(include_url=False, include_input=False)[0], where, param) from None


def _path(where: str, loc: tuple[int | str, ...]) -> str:
    """``messages[2].content`` from a base path and a pydantic location."""
    out = where
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out or "body"


def _proxy_error(error: Any, where: str, param: str | None) -> ProxyError:
    loc = tuple(error["loc"])
    ours = error["ctx"] if error["type"] == _CUSTOM else {}
    param = ours.get("param") or param or where or (str(loc[0]) if loc else "body")
    if "message" in ours:
        return bad_request(ours["message"], param)
    name = _path(where, (*loc, ours["at"]) if ours.get("at") else loc)
    rest = ours["rest"] if ours else _WORDS.get(error["type"], " is not valid")
    return bad_request(f"'{name}'{rest}", param)


# -- field types shared by the APIs ---------------------------------------------------------------


def _integral(value: Any) -> Any:
    """JSON has one number type: ``5.0`` is the integer 5."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def _null_is_false(value: Any) -> Any:
    return False if value is None else value


def _positive(value: int | None) -> int | None:
    if value is not None and value <= 0:
        raise invalid(" must be greater than 0")
    return value


def _temperature(value: float | None) -> float | None:
    if value is not None and not 0 <= value <= 2:
        raise invalid(" must be between 0 and 2")
    return value


def _top_p(value: float | None) -> float | None:
    if value is not None and not 0 < value <= 1:
        raise invalid(" must be in (0, 1]")
    return value


def _top_k(value: int | None) -> int | None:
    if value is None:
        return None
    if value < -1:
        raise invalid(" must be -1, 0 or positive")
    return -1 if value <= 0 else value


def _seed(value: int | None) -> int | None:
    if value is not None and not -(2**63) <= value < 2**63:
        raise invalid(" is out of range")
    return value


def _stop(value: Any) -> list[str]:
    """A client's stop strings: one, or a list of up to 16, non-empty, as UTF-8; deduplicated."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid(" must be a string or an array of strings")
    if len(value) > MAX_STOP_SEQUENCES:
        raise invalid(f" may hold at most {MAX_STOP_SEQUENCES} sequences")
    if any(not v for v in value):
        raise invalid(" sequences must not be empty")
    try:
        for v in value:
            v.encode("utf-8")
    except UnicodeEncodeError:
        raise invalid(" sequences must be valid Unicode text") from None
    return list(dict.fromkeys(value))


def _non_empty(value: Any) -> Any:
    if not value:
        raise invalid(" must not be empty")
    return value


def _present(value: Any) -> Any:
    if value is None:
        raise invalid(" is required")
    return value


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise invalid(" must be a non-empty string")
    return value


def _json_text(value: Any) -> str:
    if not isinstance(value, str):
        raise invalid(" must be a JSON string")
    return value


def string_or_array(of: str) -> AfterValidator:
    """A string, an array (of ``of``), or null."""

    def check(value: Any) -> Any:
        if value is not None and not isinstance(value, (str, list)):
            raise invalid(f" must be a string or an array of {of}")
        return value

    return AfterValidator(check)


def literal(*choices: str) -> AfterValidator:
    """A string among ``choices``, refused as ``must be 'a', 'b' or 'c'``."""
    quoted = [repr(c) for c in choices]
    words = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]

    def check(value: Any) -> str:
        if not isinstance(value, str) or value not in choices:
            raise invalid(f" must be {words}")
        return value

    return AfterValidator(check)


def one_of(*choices: str) -> AfterValidator:
    """A string among ``choices``, refused as ``must be one of [...]`` (sorted)."""
    allowed = frozenset(choices)

    def check(value: Any) -> str:
        if not isinstance(value, str) or value not in allowed:
            raise invalid(f" must be one of {sorted(allowed)}")
        return value

    return AfterValidator(check)


Int = Annotated[int, BeforeValidator(_integral)]
Number = Annotated[float, Field(allow_inf_nan=False)]
Flag = Annotated[bool, BeforeValidator(_null_is_false)]  # absent or null: false
MaxTokens = Annotated[Int | None, AfterValidator(_positive)]
Temperature = Annotated[Number | None, AfterValidator(_temperature)]
TopP = Annotated[Number | None, AfterValidator(_top_p)]
TopK = Annotated[Int | None, AfterValidator(_top_k)]  # 0 and -1: no top-k (-1)
Seed = Annotated[Int | None, AfterValidator(_seed)]
StopStrings = Annotated[Any, AfterValidator(_stop)]
Present = AfterValidator(_present)  # with no default: neither absent nor null
Name = Annotated[Any, AfterValidator(_name)]  # a non-empty string: tool names, call ids
NonEmptyList = Annotated[list[Any], AfterValidator(_non_empty)]
JsonText = Annotated[Any, AfterValidator(_json_text)]  # a JSON document as a string (tool-call arguments)
Object = dict[str, Any]


class Typed(WireModel):
    """What every content part, block and input item has: a string ``type``."""

    type: str


class Text(WireModel):
    """A text part or block."""

    text: str


class Refusal(WireModel):
    """An OpenAI refusal part."""

    refusal: str
