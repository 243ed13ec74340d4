"""The engine holding the Miles Tinker gateway's contract (`--contract miles|miles-next`,
tbconsole/engine/contract.py), and the switches any contract has for testing clients
(`--starting-seconds`, `--expire-futures`). What tinker 0.38 cannot send (the 0.24.1 JSON
requests) goes over raw HTTP; one engine per contract serves the module."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from typing import Any

import httpx
import numpy as np
import pytest
import tinker
from tinker import types

from tbconsole.engine import DEFAULT_MODEL, wire
from tbconsole.engine.contract import (
    MILES_SDK_VERSION,
    ExpiryFault,
    GatewayContract,
    Readiness,
    fingerprint_forward_backward,
)
from tbconsole.engine.futures import FutureStore, Outcome

SDK_VERSION = tinker.__version__
TOKENS = list(range(10, 30))


# ---------------------------------------------------------------------- engines and raw HTTP
def _embedded(tmp_path_factory, device: str, **settings: Any):
    from tbconsole.engine import EmbeddedEngine

    return EmbeddedEngine(data_dir=tmp_path_factory.mktemp("engine-data"), device=device, max_context=2048,
                          kv_budget_tokens=65_536, long_poll_s=5.0, **settings)  # fmt: skip


@pytest.fixture(scope="module")
def miles(tmp_path_factory, device):
    """The Miles gateway v1: two sub-generations in flight at most, and a delivered result is
    gone at once (so an identical retry after delivery meets the expired future)."""
    with _embedded(tmp_path_factory, device, contract="miles", max_active_samples=2,
                   future_replay_seconds=0.0) as eng:  # fmt: skip
        yield eng


@pytest.fixture(scope="module")
def miles_next(tmp_path_factory, device):
    """miles-next, still "starting" (healthz 503) for the whole module; the SDK does not ask."""
    with _embedded(tmp_path_factory, device, contract="miles-next", starting_seconds=3600.0) as eng:
        yield eng


class Raw:
    """The 0.24.1 SDK's JSON requests, by hand."""

    def __init__(self, engine):
        self.engine = engine
        self.http = httpx.Client(base_url=f"{engine.base_url}/api/v1", headers={"X-API-Key": engine.api_key},
                                 timeout=120)  # fmt: skip

    def post(self, path: str, body: Any = None, **kw: Any) -> httpx.Response:
        return self.http.post(path, json=body, **kw) if body is not None else self.http.post(path, **kw)

    def result(self, rid: str) -> httpx.Response:
        """retrieve_future until it is no longer try_again (a bounded wait: a stall fails)."""
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            r = self.post("/retrieve_future", {"request_id": rid})
            protobuf = r.headers["content-type"].startswith(wire.PROTO_CONTENT_TYPE)  # a sample's result
            if r.status_code != 200 or protobuf or r.json().get("type") != "try_again":
                return r
        raise AssertionError(f"request {rid} still running after 300 s")

    def ok(self, path: str, body: Any) -> dict[str, Any]:
        """Submit, then the future's result (which must succeed)."""
        r = self.post(path, body)
        assert r.status_code == 200, r.text
        out = self.result(r.json()["request_id"])
        assert out.status_code == 200 and "error" not in out.json(), out.text
        return out.json()

    def session(self) -> str:
        body = {"tags": [], "sdk_version": MILES_SDK_VERSION, "type": "create_session"}
        return self.post("/create_session", body).json()["session_id"]

    def model(self, session: str, seq: int = 0) -> str:
        body = {"session_id": session, "model_seq_id": seq, "base_model": DEFAULT_MODEL, "type": "create_model",
                "lora_config": {"rank": 4, "train_unembed": True, "train_mlp": True, "train_attn": True}}  # fmt: skip
        return self.ok("/create_model", body)["model_id"]

    def base_sampler(self, session: str, seq: int = 0) -> str:
        body = {"session_id": session, "sampling_session_seq_id": seq, "base_model": DEFAULT_MODEL}
        r = self.post("/create_sampling_session", body)
        assert r.status_code == 200, r.text
        return r.json()["sampling_session_id"]


@pytest.fixture(scope="module")
def raw(miles):
    return Raw(miles)


def _json_datum(tokens: list[int]) -> dict[str, Any]:
    n = len(tokens) - 1
    return {
        "model_input": {"chunks": [{"tokens": tokens[:-1], "type": "encoded_text"}]},
        "loss_fn_inputs": {
            "target_tokens": {"data": tokens[1:], "dtype": "int64", "shape": [n]},
            "weights": {"data": [1.0] * n, "dtype": "float32", "shape": [n]},
        },
    }


def _fb(model_id: str, seq_id: int, tokens: list[int] = TOKENS) -> dict[str, Any]:
    return {"forward_backward_input": {"data": [_json_datum(tokens)], "loss_fn": "cross_entropy"},
            "model_id": model_id, "seq_id": seq_id}  # fmt: skip


def _optim(model_id: str, seq_id: int, lr: float = 1e-2) -> dict[str, Any]:
    adam = types.AdamParams(learning_rate=lr).model_dump(mode="json")
    return {"adam_params": adam, "model_id": model_id, "seq_id": seq_id, "type": "optim_step"}


def _sample(sampler: str, seq_id: int, num_samples: int, max_tokens: int, **extra: Any) -> dict[str, Any]:
    return {"sampling_session_id": sampler, "seq_id": seq_id, "num_samples": num_samples,
            "prompt": {"chunks": [{"tokens": [1, 2, 3], "type": "encoded_text"}]},
            "sampling_params": {"max_tokens": max_tokens, "stop": []}, "type": "sample", **extra}  # fmt: skip


def _sdk_datum(tokens: list[int] = TOKENS) -> types.Datum:
    inputs: dict[str, Any] = {"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)}
    return types.Datum(model_input=types.ModelInput.from_ints(tokens[:-1]), loss_fn_inputs=inputs)


# ---------------------------------------------------------------------- settings, no engine
def test_contract_switch_and_fault_flags_reach_the_settings():
    from tbconsole.engine import cli
    from tbconsole.engine.server import EngineSettings

    p = argparse.ArgumentParser()
    cli.add_arguments(p)
    flags = "--contract miles-next --starting-seconds 20 --expire-futures 0.1 --fault-seed 7"
    args = p.parse_args([*flags.split(), "--max-active-samples", "8", "--operation-gap-timeout", "30"])
    s = cli.settings_from_args(args)
    assert s.contract is GatewayContract.MILES_NEXT and s.contract.value == "miles-next"
    assert (s.starting_seconds, s.expire_futures, s.fault_seed) == (20.0, 0.1, 7)
    assert (s.max_active_samples, s.operation_gap_timeout) == (8, 30.0)
    default = cli.settings_from_args(p.parse_args([]))
    assert default.contract is GatewayContract.TINKER and default.max_active_samples == 64
    assert (default.starting_seconds, default.expire_futures, default.operation_gap_timeout) == (0.0, 0.0, 600.0)
    assert [c.value for c in GatewayContract] == ["tinker", "miles", "miles-next"]
    with pytest.raises(ValueError, match="expire-futures"):
        EngineSettings(expire_futures=1.5)
    with pytest.raises(ValueError, match="miles-next"):
        EngineSettings(contract="miles-v2")  # type: ignore[arg-type]


def test_readiness_holds_for_the_starting_seconds():
    now = [100.0]
    ready = Readiness(20.0, clock=lambda: now[0])
    assert ready.remaining() == 20.0  # not started: the whole hold ahead
    ready.start()
    now[0] = 119.5
    assert ready.remaining() == pytest.approx(0.5)
    now[0] = 120.0
    assert ready.remaining() == 0.0
    zero = Readiness(0.0)
    zero.start()
    assert zero.remaining() == 0.0


def test_a_delivered_result_replays_within_its_window_then_is_gone():
    now = [0.0]
    store = FutureStore(keep_after_read_s=300.0, retention_s=900.0, tombstones=True, clock=lambda: now[0])

    async def go():
        rid = store.create("optim_step", "m")
        store.resolve(rid, Outcome(payload={"metrics": {}}))
        assert (await store.wait(rid, 0)).payload == {"metrics": {}}
        now[0] = 300.0
        assert (await store.wait(rid, 0)).payload == {"metrics": {}}  # a replay, inside the window
        now[0] = 300.5
        with pytest.raises(KeyError):
            await store.wait(rid, 0)
        assert "replay window (300 s) expired" in store.gone_reason(rid)

    asyncio.run(go())


def test_a_result_never_retrieved_within_its_retention_is_reaped_and_running_ones_never_are():
    now = [0.0]
    store = FutureStore(retention_s=900.0, tombstones=True, clock=lambda: now[0])

    async def go():
        done, running, polled = store.create("forward_backward"), store.create("forward_backward"), store.create("x")
        store.resolve(done, Outcome(payload={}))
        now[0] = 800.0
        assert await store.wait(polled, 0) is None  # polled while running: the clock restarts
        store.resolve(polled, Outcome(payload={}))
        now[0] = 900.5
        with pytest.raises(KeyError):
            await store.wait(done, 0)
        assert "never retrieved within its retention (900 s)" in store.gone_reason(done)
        assert await store.wait(running, 0) is None  # still running: kept, whatever its age
        assert (await store.wait(polled, 0)).payload == {}  # 100.5 s since its last poll

    asyncio.run(go())
    # The tinker contract's store keeps unread results and leaves no tombstones.
    plain = FutureStore()
    rid = plain.create("forward_backward")
    assert plain.known(rid) and plain.gone_reason(rid) is None


def test_the_expiry_fault_touches_only_completed_training_results():
    fault = ExpiryFault(1.0, seed=0)
    assert not fault.hits("forward_backward", None)  # still running
    assert not fault.hits("optim_step", Outcome(error="bad", category="user"))
    assert not fault.hits("sample", Outcome(payload=b""))
    assert not fault.hits("create_model", Outcome(payload={}))
    assert fault.hits("forward_backward", Outcome(payload=b"")) and fault.hits("optim_step", Outcome(payload={}))
    assert fault.stats() == {"expired_futures": 2}
    a, b = ExpiryFault(0.3, seed=5), ExpiryFault(0.3, seed=5)
    draws = [a.hits("optim_step", Outcome(payload={})) for _ in range(50)]
    assert draws == [b.hits("optim_step", Outcome(payload={})) for _ in range(50)]  # seeded: repeatable
    assert 0 < sum(draws) < 50 and a.stats() == {"expired_futures": sum(draws)}
    assert not ExpiryFault(0.0, seed=0).hits("optim_step", Outcome(payload={}))


def test_json_forward_backward_decodes_to_what_the_protobuf_one_does():
    from tinker.proto.request_conv import forward_backward_request_to_proto

    datum = types.Datum(
        model_input=types.ModelInput.from_ints(TOKENS[:-1]),
        loss_fn_inputs={"target_tokens": TOKENS[1:], "logprobs": [-1.5] * 19, "advantages": [0.25] * 19},
    )
    req = types.ForwardBackwardRequest(
        forward_backward_input=types.ForwardBackwardInput(data=[datum], loss_fn="ppo",
                                                          loss_fn_config={"clip_low_threshold": 0.8}),
        model_id="m", seq_id=3,
    )  # fmt: skip
    proto = wire.decode_forward_backward(forward_backward_request_to_proto(req).SerializeToString(), None)
    # The body tinker 0.24.1 posts for the same request (its JSON dump, fields sorted as it sends them).
    body = {"forward_backward_input": {"data": [{"loss_fn_inputs": {
        "target_tokens": {"data": TOKENS[1:], "dtype": "int64", "shape": [19]},
        "logprobs": {"data": [-1.5] * 19, "dtype": "float32", "shape": [19]},
        "advantages": {"data": [0.25] * 19, "dtype": "float32", "shape": [19]}},
        "model_input": {"chunks": [{"tokens": TOKENS[:-1], "type": "encoded_text"}]}}],
        "loss_fn": "ppo", "loss_fn_config": {"clip_low_threshold": 0.8}}, "model_id": "m", "seq_id": 3}  # fmt: skip
    js = wire.decode_json_forward_backward(body, input_key="forward_backward_input", forward_only=False)
    assert (js.model_id, js.seq_id, js.loss_fn, js.loss_fn_config, js.forward_only) == (
        proto.model_id, proto.seq_id, proto.loss_fn, proto.loss_fn_config, proto.forward_only)  # fmt: skip
    assert np.array_equal(js.data[0].tokens, proto.data[0].tokens) and js.data[0].tokens.dtype == np.int64
    assert set(js.data[0].inputs) == set(proto.data[0].inputs)
    for name, arr in proto.data[0].inputs.items():
        assert js.data[0].inputs[name].dtype == arr.dtype and np.array_equal(js.data[0].inputs[name], arr)
    assert fingerprint_forward_backward(js) == fingerprint_forward_backward(proto)
    with pytest.raises(Exception, match="only dense"):
        bad = {**body["forward_backward_input"]["data"][0]["loss_fn_inputs"]["logprobs"], "sparse_crow_indices": [0]}
        body["forward_backward_input"]["data"][0]["loss_fn_inputs"]["logprobs"] = bad
        wire.decode_json_forward_backward(body, input_key="forward_backward_input", forward_only=False)


# ---------------------------------------------------------------------- the Miles contracts, live
@pytest.mark.e2e
def test_healthz_is_503_while_starting_and_health_is_liveness(miles, miles_next):
    with httpx.Client(timeout=30) as http:
        r = http.get(f"{miles_next.base_url}/api/v1/healthz")
        assert r.status_code == 503, r.text
        assert r.json()["detail"].startswith("trainer is initializing") and r.json()["error"] == r.json()["detail"]
        assert http.get(f"{miles_next.base_url}/health").json() == {"status": "ok"}
        # Without --starting-seconds the engine is ready once it serves (the model is built first).
        assert http.get(f"{miles.base_url}/api/v1/healthz").json() == {"status": "ok"}


@pytest.mark.e2e
def test_miles_serves_exactly_tinker_0_24_1(raw):
    want = (f"unsupported tinker SDK version '{SDK_VERSION}': this deployment serves exactly "
            "tinker==0.24.1. Pin tinker==0.24.1.")  # fmt: skip
    session = {"tags": [], "sdk_version": SDK_VERSION, "type": "create_session"}
    for path, body in (("/client/config", {"sdk_version": SDK_VERSION}), ("/create_session", session)):
        r = raw.post(path, body)
        assert r.status_code == 400 and r.json()["detail"] == want, r.text
    flags = raw.post("/client/config", {"sdk_version": MILES_SDK_VERSION}).json()
    assert flags["proto_write_fwdbwd"] is False and flags["fwd_via_fwdbwd"] is False
    assert flags["parallel_fwdbwd_chunks"] is True and flags["sample_max_concurrent_requests"] == 64
    assert raw.session().startswith("tbc-")  # 0.24.1 leaves out user_metadata: accepted


@pytest.mark.e2e
def test_miles_next_lifts_the_pin_and_takes_protobuf(miles_next):
    flags = httpx.post(f"{miles_next.base_url}/api/v1/client/config", json={"sdk_version": SDK_VERSION}).json()
    assert flags["proto_write_fwdbwd"] is True
    sc = tinker.ServiceClient(base_url=miles_next.base_url, api_key=miles_next.api_key)
    tc = sc.create_lora_training_client(base_model=DEFAULT_MODEL, rank=4).result()  # 0.38 asks
    out = tc.forward_backward([_sdk_datum()], "cross_entropy").result()  # a protobuf body
    assert np.isfinite(out.metrics["loss:sum"])


@pytest.mark.e2e
def test_json_forward_backward_trains_exactly_like_the_protobuf_path(raw, miles_next):
    mid = raw.model(raw.session())
    first = raw.ok("/forward_backward", _fb(mid, 1))
    assert first["loss_fn_output_type"] == "ArrayRecord" and set(first["metrics"]) == {"loss:sum"}
    lp = first["loss_fn_outputs"][0]["logprobs"]
    assert lp["dtype"] == "float32" and lp["shape"] == [19] and len(lp["data"]) == 19
    raw.ok("/optim_step", _optim(mid, 2))
    after = raw.ok("/forward_backward", _fb(mid, 3))

    # The same steps through tinker 0.38 (protobuf) on miles-next: the same numbers.
    sc = tinker.ServiceClient(base_url=miles_next.base_url, api_key=miles_next.api_key)
    tc = sc.create_lora_training_client(base_model=DEFAULT_MODEL, rank=4).result()
    p_first = tc.forward_backward([_sdk_datum()], "cross_entropy").result()
    tc.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    p_after = tc.forward_backward([_sdk_datum()], "cross_entropy").result()
    for js, pb in ((first, p_first), (after, p_after)):
        assert np.allclose(js["loss_fn_outputs"][0]["logprobs"]["data"], pb.loss_fn_outputs[0]["logprobs"].data,
                           atol=1e-4)  # fmt: skip
        assert js["metrics"]["loss:sum"] == pytest.approx(pb.metrics["loss:sum"], rel=1e-5)
    assert after["metrics"]["loss:sum"] < first["metrics"]["loss:sum"]  # it trained


@pytest.mark.e2e
def test_miles_refuses_protobuf_forward_backward_and_serves_json_forward(raw, miles):
    from tinker.proto.request_conv import forward_backward_request_to_proto

    mid = raw.model(raw.session())
    req = types.ForwardBackwardRequest(
        forward_backward_input=types.ForwardBackwardInput(data=[_sdk_datum()], loss_fn="cross_entropy"),
        model_id=mid, seq_id=1,
    )  # fmt: skip
    r = raw.post("/forward_backward", content=forward_backward_request_to_proto(req).SerializeToString(),
                 headers={"Content-Type": "application/x-protobuf"})  # fmt: skip
    assert r.status_code == 415 and "must be JSON" in r.json()["detail"] and "0.24.1" in r.json()["detail"]
    body = {"forward_input": _fb(mid, 1)["forward_backward_input"], "model_id": mid, "seq_id": 1}
    out = raw.ok("/forward", body)
    assert len(out["loss_fn_outputs"][0]["logprobs"]["data"]) == 19
    assert not miles.engine.runs.loaded(mid).pending_grad  # forward only: no gradient


@pytest.mark.e2e
def test_sampling_beyond_capacity_is_429_before_anything_is_spent(raw, miles):
    sampler = raw.base_sampler(raw.session())
    busy = raw.post("/asample", _sample(sampler, 0, num_samples=2, max_tokens=1000))  # the whole capacity
    assert busy.status_code == 200, busy.text
    refused = raw.post("/asample", _sample(sampler, 1, num_samples=1, max_tokens=4))
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "1", refused.text
    assert "sampling capacity reached" in refused.json()["detail"]
    too_big = raw.post("/asample", _sample(sampler, 2, num_samples=3, max_tokens=4))
    assert too_big.status_code == 400 and "capacity of 2" in too_big.json()["detail"]
    assert raw.result(busy.json()["request_id"]).status_code == 200
    # Nothing was spent: the identical request goes through once there is room.
    again = raw.post("/asample", _sample(sampler, 1, num_samples=1, max_tokens=4))
    assert again.status_code == 200 and raw.result(again.json()["request_id"]).status_code == 200
    stats = httpx.get(f"{miles.base_url}/api/v1/status").json()["sampling_admission"]
    assert stats["capacity"] == 2 and stats["rejected"] >= 1


@pytest.mark.e2e
def test_one_request_per_seq_id_422_for_another_payload_410_once_gone(raw):
    mid = raw.model(raw.session())
    first = raw.post("/forward_backward", _fb(mid, 1)).json()
    assert raw.post("/forward_backward", _fb(mid, 1)).json() == first  # an identical retry: the same promise
    conflict = raw.post("/forward_backward", _fb(mid, 1, TOKENS[::-1]))
    assert conflict.status_code == 422 and "already used by a different request" in conflict.json()["detail"]
    assert raw.post("/optim_step", _optim(mid, 1)).status_code == 422  # another verb on a spent seq_id
    assert raw.result(first["request_id"]).status_code == 200
    # Delivered, and this engine's replay window is 0 s: the future is gone, and so is the retry's.
    gone = raw.result(first["request_id"])
    assert gone.status_code == 410 and "replay window" in gone.json()["detail"]
    retry = raw.post("/forward_backward", _fb(mid, 1))
    assert retry.status_code == 410 and "replay window" in retry.json()["detail"]
    unknown = raw.post("/retrieve_future", {"request_id": "0badf00d-optim_step-1"})
    assert unknown.status_code == 410 and "unknown request" in unknown.json()["detail"]


@pytest.mark.e2e
def test_no_gap_stall_operations_run_in_arrival_order(raw):
    """Miles waits for a missing seq_id (its gap timeout); this engine never does, which is
    why the timeout bounds nothing here."""
    mid = raw.model(raw.session())
    assert "loss:sum" in raw.ok("/forward_backward", _fb(mid, 7))["metrics"]  # seq_ids 1..6 never sent


REFUSED_AS_FAILED_FUTURES = {
    "save_weights ttl_seconds": ("/save_weights", {"path": "kept", "ttl_seconds": 60}, "ttl_seconds"),
    "named sampler checkpoint": ("/save_weights_for_sampler", {"path": "named"}, "named sampler checkpoints"),
    "sampler publish ttl_seconds": ("/save_weights_for_sampler", {"sampling_session_seq_id": 5, "ttl_seconds": 60},
                                    "ttl_seconds"),
    "weights-only load": ("/load_weights", {"path": "tinker://x/weights/y", "optimizer": False}, "weights-only"),
}  # fmt: skip


@pytest.mark.e2e
@pytest.mark.parametrize("case", sorted(REFUSED_AS_FAILED_FUTURES))
def test_miles_refusals_on_a_spent_seq_id_are_failed_futures(raw, case):
    path, fields, words = REFUSED_AS_FAILED_FUTURES[case]
    mid = raw.model(raw.session())
    body = {"model_id": mid, "seq_id": 1, **fields}
    r = raw.post(path, body)
    assert r.status_code == 200, r.text
    out = raw.result(r.json()["request_id"]).json()
    assert out["category"] == "user" and words in out["error"], out
    assert raw.post("/optim_step", _optim(mid, 1)).status_code == 422  # the seq_id is spent


@pytest.mark.e2e
def test_miles_refuses_topk_prompt_logprobs_as_a_failed_sample(raw):
    sampler = raw.base_sampler(raw.session())
    r = raw.post("/asample", _sample(sampler, 0, num_samples=1, max_tokens=2, topk_prompt_logprobs=3))
    out = raw.result(r.json()["request_id"]).json()
    assert out["category"] == "user" and "topk_prompt_logprobs" in out["error"], out


REFUSED_AS_400 = {
    "LoRA seed": ("/create_model", "lora_config.seed"),
    "per-module train flags": ("/create_model", "per-module train flags"),
    "sampling session from a model_path": ("/create_sampling_session", "sampling from saved checkpoints"),
}


@pytest.mark.e2e
@pytest.mark.parametrize("case", sorted(REFUSED_AS_400))
def test_miles_refusals_at_submit_are_400(raw, case):
    path, words = REFUSED_AS_400[case]
    session = raw.session()
    lora = {"rank": 4, "seed": 1} if case == "LoRA seed" else {"rank": 4, "train_mlp": False}
    body = {
        "/create_model": {"session_id": session, "model_seq_id": 0, "base_model": DEFAULT_MODEL, "lora_config": lora},
        "/create_sampling_session": {"session_id": session, "sampling_session_seq_id": 0,
                                     "model_path": "tinker://x/sampler_weights/y"},
    }[path]  # fmt: skip
    r = raw.post(path, body)
    assert r.status_code == 400 and words in r.json()["detail"], r.text


@pytest.mark.e2e
def test_latest_only_a_republish_fails_earlier_samplers_loudly(miles_next):
    sc = tinker.ServiceClient(base_url=miles_next.base_url, api_key=miles_next.api_key)
    tc = sc.create_lora_training_client(base_model=DEFAULT_MODEL, rank=4).result()
    base = sc.create_sampling_client(base_model=DEFAULT_MODEL).result()
    prompt, params = types.ModelInput.from_ints([1, 2, 3]), types.SamplingParams(max_tokens=3, stop=[])
    first = tc.save_weights_and_get_sampling_client().result()
    assert len(first.sample(prompt, 1, params).result().sequences[0].tokens) == 3
    second = tc.save_weights_and_get_sampling_client().result()
    with pytest.raises(Exception, match="published again as version 2") as stale:
        first.sample(prompt, 1, params).result()
    assert "version 1" in str(stale.value)
    assert len(second.sample(prompt, 1, params).result().sequences[0].tokens) == 3
    assert len(base.sample(prompt, 1, params).result().sequences[0].tokens) == 3  # base model: unaffected


# ---------------------------------------------------------------------- --expire-futures, any contract
@pytest.mark.e2e
def test_expired_training_results_are_410_yet_ran_exactly_once(tmp_path_factory, device):
    with _embedded(tmp_path_factory, device, expire_futures=1.0, fault_seed=0) as eng:  # the tinker contract
        sc = tinker.ServiceClient(base_url=eng.base_url, api_key=eng.api_key)
        tc = sc.create_lora_training_client(base_model=DEFAULT_MODEL, rank=4).result()  # create_model: kept
        fb = tc.forward_backward([_sdk_datum()], "cross_entropy")
        opt = tc.optim_step(types.AdamParams(learning_rate=1e-2))
        for future in (fb, opt):
            with pytest.raises(Exception, match="Promise expired"):
                future.result()
        run = eng.engine.runs.loaded(tc.model_id)
        assert run.steps == 1 and not run.pending_grad  # both ran, once
        sampler = sc.create_sampling_client(base_model=DEFAULT_MODEL).result()  # samples: never expired
        assert sampler.sample(types.ModelInput.from_ints([1, 2]), 1, types.SamplingParams(max_tokens=2)).result()
        status = httpx.get(f"{eng.base_url}/api/v1/status").json()
        assert status["contract"] == "tinker" and status["faults"] == {"expired_futures": 2}


@pytest.mark.e2e
def test_the_cli_runs_miles_next_starting_with_expiring_futures(tmp_path):
    """The command runner tests start: `--contract miles-next --starting-seconds 20 --expire-futures 0.1`."""
    script = "import sys\nfrom tbconsole.engine.cli import add_arguments, run\nimport argparse\n" \
             "p = argparse.ArgumentParser(); add_arguments(p); sys.exit(run(p.parse_args(sys.argv[1:])))"  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TINKER_TELEMETRY": "0", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", script, "--port", "0", "--data-dir", str(tmp_path), "--threads", "1",
         "--contract", "miles-next", "--starting-seconds", "20", "--expire-futures", "0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    try:
        url, lines = None, []
        deadline = time.monotonic() + 120
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "serving http://" in line:
                url = line.rsplit("serving ", 1)[1].strip()
        assert url, "".join(lines)
        with httpx.Client(base_url=url, timeout=30) as http:
            r = http.get("/api/v1/healthz")
            assert r.status_code == 503 and "initializing" in r.json()["detail"]
            assert http.get("/health").status_code == 200
            assert http.post("/api/v1/client/config", json={"sdk_version": SDK_VERSION}).status_code == 200
            status = http.get("/api/v1/status").json()
            assert status["contract"] == "miles-next" and status["faults"] == {"expired_futures": 0}
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.e2e
async def test_the_runs_probe_finds_latest_weights_only_without_an_sdk_error_on_the_console(miles_next, caplog):
    from tbconsole.runner.checkpoints import serves_older_weights

    sc = tinker.ServiceClient(base_url=miles_next.base_url, api_key=miles_next.api_key)
    tc = await sc.create_lora_training_client_async(base_model=DEFAULT_MODEL, rank=4)
    with caplog.at_level(logging.INFO, logger="tinker"):
        assert await serves_older_weights(tc) is False
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
