"""Wire formats: the SDK's own protobuf schema for forward_backward requests and for
ForwardBackwardOutput / SampleResponse results (the SDK accepts only protobuf for those two),
plus helpers for the JSON requests (validated with the SDK's pydantic request types)."""

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
