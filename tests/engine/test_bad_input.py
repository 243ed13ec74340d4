"""Bad requests get a 4xx with a message the SDK surfaces, and the engine keeps serving
everyone (including the client that sent the bad request)."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
import tinker
import zstandard
from tinker import types

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def clients(service_client, base_model):
    tc = service_client.create_lora_training_client(base_model=base_model, rank=4).result()
    sampler = tc.save_weights_and_get_sampling_client().result()
    return tc, sampler


def _ok_datum(n=8) -> types.Datum:
    toks = list(range(10, 10 + n + 1))
    return types.Datum(
        model_input=types.ModelInput.from_ints(toks[:-1]),
        loss_fn_inputs={"target_tokens": toks[1:], "weights": [1.0] * n},
    )


def _still_serves(tc, sampler) -> None:
    out = tc.forward_backward([_ok_datum()], "cross_entropy").result()
    assert np.isfinite(out.metrics["loss:sum"])
    tc.optim_step(types.AdamParams(learning_rate=0.0)).result()
    seq = (
        sampler.sample(types.ModelInput.from_ints([1, 2, 3]), 1, types.SamplingParams(max_tokens=4, stop=[]))
        .result()
        .sequences[0]
    )
    assert len(seq.tokens) == 4


def _status_error(fn) -> tinker.APIStatusError:
    with pytest.raises(tinker.APIStatusError) as info:
        fn()
    return info.value


def test_training_bad_inputs(clients, service_client, limits):
    tc, sampler = clients
    MAX_CONTEXT, MAX_TOKENS_PER_REQUEST = limits["max_context"], limits["max_tokens_per_request"]
    e = _status_error(lambda: service_client.create_lora_training_client(base_model="Qwen/Qwen3-8B", rank=4).result())
    assert e.status_code == 400 and "not served" in str(e)

    mismatched = types.Datum(
        model_input=types.ModelInput.from_ints([1, 2, 3, 4]),
        loss_fn_inputs={"target_tokens": [2, 3, 4], "weights": [1.0, 1.0, 1.0]},
    )
    e = _status_error(lambda: tc.forward_backward([mismatched], "cross_entropy").result())
    assert e.status_code == 400 and "model_input has 4 tokens" in str(e)

    missing = types.Datum(model_input=types.ModelInput.from_ints([1, 2]), loss_fn_inputs={"target_tokens": [2, 3]})
    e = _status_error(lambda: tc.forward_backward([missing], "ppo").result())
    assert e.status_code == 400 and "advantages" in str(e)

    out_of_vocab = types.Datum(
        model_input=types.ModelInput.from_ints([1, 10**6]), loss_fn_inputs={"target_tokens": [2, 3]}
    )
    e = _status_error(lambda: tc.forward_backward([out_of_vocab], "cross_entropy").result())
    assert e.status_code == 400 and "outside" in str(e)

    nan = types.Datum(
        model_input=types.ModelInput.from_ints([1, 2]),
        loss_fn_inputs={"target_tokens": [2, 3], "logprobs": [-1.0, float("nan")], "advantages": [1.0, 1.0]},
    )
    e = _status_error(lambda: tc.forward_backward([nan], "importance_sampling").result())
    assert e.status_code == 400 and "non-finite" in str(e)

    # The pain point upstream: one oversized datum closed the model. Here: 413, model lives.
    n = MAX_CONTEXT + 10
    too_long = _ok_datum(n)
    e = _status_error(lambda: tc.forward_backward([too_long], "cross_entropy").result())
    assert e.status_code == 413 and "context" in str(e)

    per = MAX_CONTEXT - 1
    many = [_ok_datum(per) for _ in range(MAX_TOKENS_PER_REQUEST // per + 1)]
    e = _status_error(lambda: tc.forward_backward(many, "cross_entropy").result())
    assert e.status_code == 413 and "budget" in str(e)

    e = _status_error(lambda: tc.forward_backward([_ok_datum()], "ppo", {"clip_low_threshold": 1.5}).result())
    assert e.status_code == 400

    _still_serves(tc, sampler)


def test_sampling_bad_inputs(clients, limits):
    tc, sampler = clients
    MAX_CONTEXT = limits["max_context"]
    prompt = types.ModelInput.from_ints([5, 6, 7])

    def sample(n, **kw):
        return sampler.sample(prompt, n, types.SamplingParams(**kw)).result()

    cases = [
        (lambda: sample(0, max_tokens=4), 400, "num_samples"),
        (lambda: sample(1000, max_tokens=4), 400, "num_samples"),
        (lambda: sample(1, max_tokens=0), 400, "max_tokens"),
        (lambda: sample(1, max_tokens=MAX_CONTEXT), 413, "context"),
        (lambda: sample(1, max_tokens=4, top_p=0.0), 400, "top_p"),
        (lambda: sample(1, max_tokens=4, stop=[""]), 400, "stop"),
        (lambda: sampler.sample(types.ModelInput.from_ints([10**7]), 1, types.SamplingParams(max_tokens=2)).result(),
         400, "outside"),
        (lambda: sampler.sample(prompt, 1, types.SamplingParams(max_tokens=2), topk_sample_logprobs=3).result(),
         400, "not supported"),
    ]  # fmt: skip
    for fn, status, text in cases:
        e = _status_error(fn)
        assert e.status_code == status and text in str(e), (status, text, e)
    _still_serves(tc, sampler)


def test_raw_malformed_requests(engine, clients):
    tc, sampler = clients
    url = engine.base_url + "/api/v1"
    headers = {"X-API-Key": engine.api_key}
    with httpx.Client(headers=headers, timeout=30) as http:
        r = http.post(f"{url}/asample", content=b"{not json", headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and "JSON" in r.json()["error"]
        r = http.post(f"{url}/asample", json={"sampling_session_id": "nope", "seq_id": 1, "num_samples": 1,
                                              "prompt": {"chunks": [{"type": "encoded_text", "tokens": [1]}]},
                                              "sampling_params": {"max_tokens": 2}})  # fmt: skip
        assert r.status_code == 404 and "sampling session" in r.json()["error"]
        r = http.post(f"{url}/asample", json={"num_samples": 1})
        assert r.status_code == 400 and "SampleRequest" in r.json()["error"]
        r = http.post(f"{url}/forward_backward", content=b"\xff\xfe garbage",
                      headers={"Content-Type": "application/x-protobuf"})  # fmt: skip
        assert r.status_code == 400 and "protobuf" in r.json()["error"]
        r = http.post(f"{url}/forward_backward", content=b"not zstd",
                      headers={"Content-Type": "application/x-protobuf", "Content-Encoding": "zstd"})  # fmt: skip
        assert r.status_code == 400 and "zstd" in r.json()["error"]
        r = http.post(f"{url}/optim_step", json={"model_id": "nope", "adam_params": {"learning_rate": 1e-3}})
        assert r.status_code == 404 and "unknown model_id" in r.json()["error"]
        r = http.post(f"{url}/retrieve_future", json={"request_id": "nope"})
        assert r.status_code == 404
        load = {"model_id": tc.model_id, "optimizer": False}
        r = http.post(f"{url}/load_weights", json={**load, "path": "file:///etc/passwd"})
        assert r.status_code == 400 and "tinker path" in r.json()["error"]
        r = http.post(f"{url}/load_weights", json={**load, "path": "tinker://x/weights/../../etc"})
        assert r.status_code == 400
        r = http.get(f"{url}/training_runs/nope/checkpoints")
        assert r.status_code == 404
        r = http.get(f"{url}/healthz")
        assert r.json() == {"status": "ok"}
        status = http.get(f"{url}/status").json()
        assert status["model"] == "tbconsole/qwen3-tiny" and status["sampler"]["requests"] > 0

        # A zstd-compressed forward_backward body (how the SDK sends it when asked) works.
        from tinker.proto.request_conv import forward_backward_request_to_proto

        req = types.ForwardBackwardRequest(
            forward_backward_input=types.ForwardBackwardInput(data=[_ok_datum()], loss_fn="cross_entropy"),
            model_id=tc.model_id, seq_id=10**6,
        )  # fmt: skip
        proto = forward_backward_request_to_proto(req)
        proto.forward_only = True
        body = zstandard.ZstdCompressor().compress(proto.SerializeToString())
        r = http.post(f"{url}/forward_backward", content=body,
                      headers={"Content-Type": "application/x-protobuf", "Content-Encoding": "zstd"})  # fmt: skip
        assert r.status_code == 200, r.text
        rid = r.json()["request_id"]
        r = http.post(f"{url}/retrieve_future", json={"request_id": rid},
                      headers={"Accept": "application/x-protobuf"})  # fmt: skip
        assert r.headers["content-type"].startswith("application/x-protobuf")
        from tinker.proto.response_conv import deserialize_forward_backward_output

        out = deserialize_forward_backward_output(r.content)
        assert len(out.loss_fn_outputs) == 1 and "loss:sum" in out.metrics
    _still_serves(tc, sampler)
