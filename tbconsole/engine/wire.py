"""Wire formats: the SDK's own protobuf schema for forward_backward requests and for
ForwardBackwardOutput / SampleResponse results (the SDK accepts only protobuf for those two),
plus helpers for the JSON requests (validated with the SDK's pydantic request types).

The JSON forward_backward of tinker 0.24.1 (the Miles contracts, `contract.py`) decodes to the
same `ForwardBackwardIn` as the protobuf one, and its result is JSON
(`forward_backward_output_json`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import zstandard
from google.protobuf.message import DecodeError
from pydantic import BaseModel, ValidationError
from tinker.proto import tinker_public_pb2 as pb

from tbconsole.engine.errors import BadRequest

PROTO_CONTENT_TYPE = "application/x-protobuf"
# Decompressed forward_backward bodies larger than this are refused before parsing.
MAX_DECOMPRESSED_BYTES = 1 << 30

_DTYPES = {
    pb.DTYPE_FLOAT32: np.float32,
    pb.DTYPE_INT64: np.int64,
    pb.DTYPE_INT32: np.int32,
}


@dataclass
class DatumIn:
    tokens: np.ndarray  # int64 [T]
    inputs: dict[str, np.ndarray]  # name -> [T] (target_tokens int64, the rest float32)


@dataclass
class ForwardBackwardIn:
    model_id: str
    seq_id: int
    loss_fn: str
    loss_fn_config: dict[str, float]
    forward_only: bool
    data: list[DatumIn]


def parse_json_model[Request: BaseModel](cls: type[Request], body: Any) -> Request:
    """Validate a JSON body with the SDK's request model; 400 with pydantic's message if not."""
    if not isinstance(body, dict):
        raise BadRequest(f"expected a JSON object for {cls.__name__}")
    try:
        return cls.model_validate(body)
    except ValidationError as e:
        raise BadRequest(f"invalid {cls.__name__}: {e}") from None


def model_input_tokens(chunks: Sequence[Any], where: str) -> list[int]:
    """Token ids of a ModelInput's chunks; only encoded text is supported (no images/audio)."""
    out: list[int] = []
    for chunk in chunks:
        tokens = getattr(chunk, "tokens", None)
        if tokens is None:
            raise BadRequest(f"{where}: only encoded_text chunks are supported, got {chunk.type}")
        out.extend(tokens)
    return out


def _tensor(msg: pb.Tensor, where: str) -> np.ndarray:
    if msg.WhichOneof("encoding") != "dense":
        raise BadRequest(f"{where}: only dense 1-D loss inputs are supported")
    dtype = _DTYPES.get(msg.dtype)
    if dtype is None:
        raise BadRequest(f"{where}: unsupported dtype {msg.dtype}")
    arr = np.frombuffer(msg.dense, dtype=dtype)
    shape = list(msg.shape)
    if shape and int(np.prod(shape)) != arr.size:
        raise BadRequest(f"{where}: shape {shape} does not match {arr.size} values")
    if len(shape) > 1:
        raise BadRequest(f"{where}: only 1-D loss inputs are supported, got shape {shape}")
    return arr


def decode_forward_backward(body: bytes, content_encoding: str | None) -> ForwardBackwardIn:
    if content_encoding and content_encoding.lower() == "zstd":
        try:
            body = zstandard.ZstdDecompressor().decompress(body, max_output_size=MAX_DECOMPRESSED_BYTES)
        except zstandard.ZstdError as e:
            raise BadRequest(f"malformed zstd body: {e}") from None
    elif content_encoding and content_encoding.lower() not in ("identity",):
        raise BadRequest(f"unsupported Content-Encoding {content_encoding!r}")
    msg = pb.ForwardBackwardRequest()
    try:
        msg.ParseFromString(body)
    except DecodeError as e:
        raise BadRequest(f"malformed ForwardBackwardRequest protobuf: {e}") from None
    config: dict[str, float] = {k: float(v) for k, v in msg.loss_fn_config.items()}
    for k, v in msg.loss_fn_config_v2.items():
        if v.WhichOneof("value") == "text":
            raise BadRequest(f"loss_fn_config[{k!r}]: text values are not supported")
        config[k] = float(v.number)
    data = []
    for i, d in enumerate(msg.data):
        tokens: list[np.ndarray] = []
        for chunk in d.model_input:
            if chunk.WhichOneof("chunk") != "encoded_text":
                raise BadRequest(f"datum {i}: only encoded_text chunks are supported")
            tokens.append(np.frombuffer(chunk.encoded_text.tokens, dtype=np.int32))
        toks = np.concatenate(tokens).astype(np.int64) if tokens else np.zeros(0, np.int64)
        inputs = {}
        for name, t in d.loss_fn_inputs.items():
            arr = _tensor(t, f"datum {i} loss_fn_inputs[{name!r}]")
            inputs[name] = arr.astype(np.int64 if name == "target_tokens" else np.float32)
        data.append(DatumIn(toks, inputs))
    return ForwardBackwardIn(
        model_id=msg.model_id,
        seq_id=msg.seq_id,
        loss_fn=msg.loss_fn,
        loss_fn_config=config,
        forward_only=msg.forward_only,
        data=data,
    )


_JSON_DTYPES: dict[str, type[np.generic]] = {"int64": np.int64, "int32": np.int32, "float32": np.float32}


def _json_tensor(value: Any, where: str) -> np.ndarray:
    """A 0.24.1 TensorData `{data, dtype, shape}` as a dense 1-D array."""
    if not isinstance(value, dict):
        raise BadRequest(f"{where}: expected a TensorData object {{data, dtype, shape}}")
    if value.get("sparse_crow_indices") is not None or value.get("sparse_col_indices") is not None:
        raise BadRequest(f"{where}: only dense 1-D loss inputs are supported")
    dtype = _JSON_DTYPES.get(value.get("dtype", "float32"))
    if dtype is None:
        raise BadRequest(f"{where}: unsupported dtype {value.get('dtype')!r}")
    data = value.get("data")
    if not isinstance(data, list) or any(isinstance(x, bool) or not isinstance(x, int | float) for x in data):
        raise BadRequest(f"{where}: data must be a flat list of numbers")
    as_float = np.asarray(data, dtype=np.float64)
    if np.issubdtype(dtype, np.integer) and not np.array_equal(as_float, np.round(as_float)):
        raise BadRequest(f"{where}: {value.get('dtype')} data must be whole numbers")
    arr = as_float.astype(dtype)
    shape = value.get("shape")
    if shape is not None:
        if not isinstance(shape, list) or not all(isinstance(n, int) for n in shape):
            raise BadRequest(f"{where}: shape must be a list of integers")
        if int(np.prod(shape)) != arr.size:
            raise BadRequest(f"{where}: shape {shape} does not match {arr.size} values")
        if len(shape) > 1:
            raise BadRequest(f"{where}: only 1-D loss inputs are supported, got shape {shape}")
    return arr


def _json_tokens(model_input: Any, where: str) -> np.ndarray:
    chunks = model_input.get("chunks") if isinstance(model_input, dict) else None
    if not isinstance(chunks, list):
        raise BadRequest(f"{where}: model_input must be {{chunks: [...]}}")
    tokens: list[int] = []
    for chunk in chunks:
        kind = chunk.get("type", "encoded_text") if isinstance(chunk, dict) else None
        if kind != "encoded_text":
            raise BadRequest(f"{where}: only encoded_text chunks are supported, got {kind}")
        ids = chunk.get("tokens")
        if not isinstance(ids, list) or any(isinstance(t, bool) or not isinstance(t, int) for t in ids):
            raise BadRequest(f"{where}: chunk tokens must be a list of integers")
        tokens.extend(ids)
    return np.asarray(tokens, dtype=np.int64)


def decode_json_forward_backward(body: Any, *, input_key: str, forward_only: bool) -> ForwardBackwardIn:
    """A tinker 0.24.1 JSON forward_backward (`input_key` "forward_backward_input") or forward
    (`input_key` "forward_input") body: `{<input_key>: {data, loss_fn, loss_fn_config}, model_id,
    seq_id}`, each datum `{model_input: {chunks}, loss_fn_inputs: {name: TensorData}}`."""
    if not isinstance(body, dict) or not isinstance(body.get(input_key), dict):
        raise BadRequest(f"expected a JSON object with {input_key!r}, model_id and seq_id")
    fb = body[input_key]
    model_id, seq_id = body.get("model_id"), body.get("seq_id")
    if not isinstance(model_id, str):
        raise BadRequest("model_id must be a string")
    if seq_id is not None and (isinstance(seq_id, bool) or not isinstance(seq_id, int)):
        raise BadRequest("seq_id must be an integer")
    loss_fn = fb.get("loss_fn")
    if not isinstance(loss_fn, str):
        raise BadRequest(f"{input_key}.loss_fn must be a string")
    raw_config = fb.get("loss_fn_config") or {}
    if not isinstance(raw_config, dict):
        raise BadRequest(f"{input_key}.loss_fn_config must be an object")
    config: dict[str, float] = {}
    for k, v in raw_config.items():
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise BadRequest(f"loss_fn_config[{k!r}]: only numbers are supported")
        config[k] = float(v)
    items = fb.get("data")
    if not isinstance(items, list):
        raise BadRequest(f"{input_key}.data must be a list of datums")
    data = []
    for i, d in enumerate(items):
        if not isinstance(d, dict):
            raise BadRequest(f"datum {i}: expected an object {{model_input, loss_fn_inputs}}")
        toks = _json_tokens(d.get("model_input"), f"datum {i}")
        loss_inputs = d.get("loss_fn_inputs") or {}
        if not isinstance(loss_inputs, dict):
            raise BadRequest(f"datum {i}: loss_fn_inputs must be an object")
        inputs = {}
        for name, t in loss_inputs.items():
            arr = _json_tensor(t, f"datum {i} loss_fn_inputs[{name!r}]")
            inputs[name] = arr.astype(np.int64 if name == "target_tokens" else np.float32)
        data.append(DatumIn(toks, inputs))
    return ForwardBackwardIn(
        model_id=model_id,
        seq_id=seq_id if seq_id is not None else 0,
        loss_fn=loss_fn,
        loss_fn_config=config,
        forward_only=forward_only,
        data=data,
    )


def forward_backward_output_json(
    outputs: Sequence[Mapping[str, np.ndarray]], metrics: Mapping[str, float]
) -> dict[str, Any]:
    """ForwardBackwardOutput as the 0.24.1 SDK parses it from JSON: per datum, name -> TensorData."""
    records = [
        {
            name: {"data": np.asarray(arr, dtype=np.float32).tolist(), "dtype": "float32", "shape": [len(arr)]}
            for name, arr in o.items()
        }
        for o in outputs
    ]
    return {
        "loss_fn_output_type": "ArrayRecord",
        "loss_fn_outputs": records,
        "metrics": {k: float(v) for k, v in metrics.items()},
    }


def encode_forward_backward_output(outputs: Sequence[Mapping[str, np.ndarray]], metrics: Mapping[str, float]) -> bytes:
    """One ArrayRecord holding every datum's fields (float32, 1-D, byte offsets per datum)."""
    msg = pb.ForwardBackwardOutput()
    msg.loss_fn_output_type = "ArrayRecord"
    for k, v in metrics.items():
        msg.metrics[k] = float(v)
    if outputs:
        rec = msg.loss_fn_outputs.add()
        rec.type_tag = "ArrayRecord"
        rec.num_datums = len(outputs)
        for name in outputs[0]:
            arrays = [np.ascontiguousarray(o[name], dtype=np.float32) for o in outputs]
            bt = rec.fields[name]
            bt.dtype = pb.DTYPE_FLOAT32
            bt.data = b"".join(a.tobytes() for a in arrays)
            offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
            offsets[1:] = np.cumsum([a.nbytes for a in arrays])
            bt.offsets = offsets.tobytes()
    return msg.SerializeToString()


@dataclass
class SequenceOut:
    tokens: list[int]
    logprobs: list[float]
    stop_reason: str  # "stop" | "length"


def encode_sample_response(
    sequences: Sequence[SequenceOut], prompt_logprobs: np.ndarray | None, cache_hit_tokens: int = 0
) -> bytes:
    msg = pb.SampleResponse()
    msg.prompt_cache_hit_tokens = cache_hit_tokens
    for s in sequences:
        seq = msg.sequences.add()
        seq.tokens = np.asarray(s.tokens, dtype=np.int32).tobytes()
        seq.logprobs = np.asarray(s.logprobs, dtype=np.float32).tobytes()
        seq.stop_reason = pb.STOP_REASON_STOP if s.stop_reason == "stop" else pb.STOP_REASON_LENGTH
    if prompt_logprobs is not None:
        # NaN marks "no logprob" (the first prompt token); the SDK maps it to None.
        msg.prompt_logprobs = np.asarray(prompt_logprobs, dtype=np.float32).tobytes()
    return msg.SerializeToString()
