"""The engine survives SIGKILL: restarted on the same data dir and port, it serves the tinker SDK
clients made before the kill (session, training client, sampling clients), and the training
run carries on from its last completed optim_step, adapter and optimizer state alike.

`tbconsole engine` runs as a real process; the session's in-process engine (conftest) is the
reference that never crashed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import tinker
from tinker import types

from tests_support.web import free_port

pytestmark = pytest.mark.e2e

MODEL = "tbconsole/qwen3-tiny"
RANK = 32
ADAM = types.AdamParams(learning_rate=1e-2)
API_KEY = "tml-local"
TOL = 1e-4


class EngineProcess:
    """`python -m tbconsole engine` on a fixed port and data dir, its output in a log file."""

    def __init__(self, data_dir: Path, port: int, log: Path, device: str = "cpu"):
        self.data_dir, self.port, self.log, self.device = data_dir, port, log, device
        self.proc: subprocess.Popen | None = None
        self.url = f"http://127.0.0.1:{port}"

    def _serving_lines(self) -> int:
        return self.log.read_text().count("serving http://") if self.log.exists() else 0

    def start(self) -> EngineProcess:
        before = self._serving_lines()
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TINKER_TELEMETRY": "0", "PYTHONUNBUFFERED": "1"}
        with self.log.open("a") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tbconsole", "engine", "--port", str(self.port),
                 "--data-dir", str(self.data_dir), "--model", MODEL, "--device", self.device,
                 "--threads", "1"],
                stdout=out, stderr=subprocess.STDOUT, env=env,
            )  # fmt: skip
        deadline = time.monotonic() + 120
        while self._serving_lines() == before:
            assert self.proc.poll() is None and time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.05)
        line = [ln for ln in self.log.read_text().splitlines() if "serving http://" in ln][-1]
        assert line.rsplit("serving ", 1)[1].strip() == self.url, line
        return self

    def kill(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _batch(tokenizer) -> list[types.Datum]:
    texts = ["ls -la /var/log && tail -n 20 syslog\n", "def add(a, b):\n    return a + b\n",
             "git commit -m 'fix: handle empty input'\n"]  # fmt: skip
    out = []
    for t in texts:
        ids = tokenizer.encode(t, add_special_tokens=False)
        inputs = {"target_tokens": ids[1:], "weights": [1.0] * (len(ids) - 1)}
        out.append(types.Datum(model_input=types.ModelInput.from_ints(ids[:-1]), loss_fn_inputs=inputs))
    return out


def _logprobs(out: types.ForwardBackwardOutput) -> np.ndarray:
    return np.concatenate([o["logprobs"].to_numpy() for o in out.loss_fn_outputs])


async def _step(tc, batch) -> np.ndarray:
    fb = await tc.forward_backward(batch, "cross_entropy")
    await tc.optim_step(ADAM)
    return _logprobs(fb)


async def _forward(tc, batch) -> np.ndarray:
    return _logprobs(await tc.forward(batch, "cross_entropy"))


def _sample_out(r: types.SampleResponse) -> tuple[list[int], np.ndarray]:
    seq = r.sequences[0]
    return list(seq.tokens), np.asarray(seq.logprobs, dtype=np.float64)


def _status(url: str) -> dict:
    return httpx.get(f"{url}/api/v1/status", timeout=10).json()


async def _until(pred, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)


async def _scenario(eng: EngineProcess, reference: tinker.ServiceClient, tokenizer) -> None:
    batch = _batch(tokenizer)
    prompt = types.ModelInput.from_ints(tokenizer.encode("the agent runs", add_special_tokens=False))
    seeded = types.SamplingParams(max_tokens=24, temperature=1.0, seed=7, stop=[])
    long_sample = types.SamplingParams(max_tokens=400, temperature=1.0, seed=11, stop=[])

    service = tinker.ServiceClient(base_url=eng.url, api_key=API_KEY)
    session_id = service.holder.get_session_id()
    tc = await service.create_lora_training_client(base_model=MODEL, rank=RANK, seed=3)
    ref = await reference.create_lora_training_client(base_model=MODEL, rank=RANK, seed=3)
    # A second run whose gradients are pending (forward_backward done, no optim_step) at the kill.
    pending = await service.create_lora_training_client(base_model=MODEL, rank=4, seed=1)

    for client in (tc, ref):
        await _step(client, batch)
    sampler = await tc.save_weights_and_get_sampling_client()
    before = _sample_out(await sampler.sample(prompt, 1, seeded))
    await pending.forward_backward(batch, "cross_entropy")
    journal = _status(eng.url)["journal"]
    assert journal["state_writes"] == 1 and journal["snapshot_writes"] == 1, journal

    # Promises nobody polls before the kill: lost with the process.
    with httpx.Client(base_url=f"{eng.url}/api/v1", timeout=30) as http:
        r = http.post("/save_weights", json={"model_id": pending.model_id, "path": "x"})
        lost_train = r.json()["request_id"]
        lost_sample = http.post("/asample", json={
            "sampling_session_id": sampler._sampling_session_id, "seq_id": 1, "num_samples": 1,
            "prompt": prompt.model_dump(), "sampling_params": {"max_tokens": 1000, "stop": []},
        }).json()["request_id"]  # fmt: skip

    # Kill the engine while the SDK waits on a sample and on a forward_backward.
    big = [types.Datum(model_input=types.ModelInput.from_ints([5 + i % 1000 for i in range(2000)]),
                       loss_fn_inputs={"target_tokens": [7] * 2000}) for _ in range(4)]  # fmt: skip
    train_in_flight = asyncio.ensure_future(pending.forward_backward(big, "cross_entropy").result_async())
    in_flight = asyncio.ensure_future(sampler.sample(prompt, 1, long_sample))
    await _until(lambda: (p := _status(eng.url)["pending_futures"]).get("sample", 0) >= 2
                 and p.get("forward_backward", 0) >= 1)  # fmt: skip
    eng.kill()
    t_kill = time.monotonic()
    await asyncio.to_thread(eng.start)
    restart_s = time.monotonic() - t_kill

    # The sample in flight at the kill is sent again by the SDK (410 on its promise) and gives
    # what the same seeded request gives now.
    crashed = _sample_out(await asyncio.wait_for(in_flight, 120))
    again = _sample_out(await sampler.sample(prompt, 1, long_sample))
    assert crashed[0] == again[0] and len(crashed[0]) == 400
    np.testing.assert_allclose(crashed[1], again[1], atol=TOL)

    # The training request in flight fails, saying why (the SDK raises; the client is usable).
    with pytest.raises(ValueError, match="lost: the engine restarted"):
        await asyncio.wait_for(train_in_flight, 120)

    # Same sampling client, same weights as before the kill.
    after = _sample_out(await sampler.sample(prompt, 1, seeded))
    assert after[0] == before[0]
    np.testing.assert_allclose(after[1], before[1], atol=TOL)

    # The session is known again: heartbeats are accepted and it makes new clients.
    r = httpx.post(f"{eng.url}/api/v1/session_heartbeat", json={"session_id": session_id}, timeout=10)
    assert r.status_code == 200, r.text
    base_sampler = await service.create_sampling_client(base_model=MODEL)
    assert len((await base_sampler.sample(prompt, 1, seeded)).sequences[0].tokens) == 24

    # Lost promises fail clearly rather than hang: 404 for training, 410 for sampling.
    with httpx.Client(base_url=f"{eng.url}/api/v1", timeout=30) as http:
        r = http.post("/retrieve_future", json={"request_id": lost_train})
        assert r.status_code == 404 and "lost" in r.json()["error"] and "restarted" in r.json()["error"]
        r = http.post("/retrieve_future", json={"request_id": lost_sample})
        assert r.status_code == 410

    # Training carries on from step 1 exactly as the engine that never crashed does.
    step1, want = await _step(tc, batch), await _step(ref, batch)
    np.testing.assert_allclose(step1, want, atol=TOL)  # adapter after step 1
    step2, want = await _forward(tc, batch), await _forward(ref, batch)
    np.testing.assert_allclose(step2, want, atol=TOL)  # adapter + AdamW state after step 2
    assert np.abs(step2 - step1).max() > 100 * TOL  # a step moves far more than the tolerance
    sampler2 = await tc.save_weights_and_get_sampling_client()
    ref_sampler2 = await ref.save_weights_and_get_sampling_client()
    lp, ref_lp = await sampler2.compute_logprobs(prompt), await ref_sampler2.compute_logprobs(prompt)
    np.testing.assert_allclose(np.asarray(lp[1:], float), np.asarray(ref_lp[1:], float), atol=TOL)

    # The run whose gradients died with the process refuses one optim_step, then trains again.
    with pytest.raises(tinker.RequestFailedError, match="gradients were lost"):
        await pending.optim_step(ADAM)
    await _step(pending, batch)

    print(f"\nengine restart took {restart_s:.1f}s; journal: {_status(eng.url)['journal']}")
    await service.close("success")


def test_clients_carry_on_after_sigkill(tmp_path, service_client, tokenizer, device):
    eng = EngineProcess(tmp_path / "data", free_port(), tmp_path / "engine.log", device).start()
    try:
        asyncio.run(_scenario(eng, service_client, tokenizer))
    finally:
        eng.stop()
    log = eng.log.read_text()
    assert "restored training run" in log and "restored sampling session" in log, log


def test_unknown_ids_without_journal_get_a_clear_4xx(engine):
    fake_session = "tbc-0123456789ab"
    with httpx.Client(base_url=f"{engine.base_url}/api/v1", headers={"X-API-Key": engine.api_key},
                      timeout=30) as http:  # fmt: skip
        r = http.post("/get_info", json={"model_id": f"{fake_session}:train:0"})
        assert r.status_code == 404 and "unknown model_id" in r.json()["error"]
        r = http.post("/optim_step", json={"model_id": "../../etc:train:0", "adam_params": {"learning_rate": 1e-3}})
        assert r.status_code == 404 and "unknown model_id" in r.json()["error"]
        r = http.post("/session_heartbeat", json={"session_id": fake_session})
        assert r.status_code == 404
        r = http.post("/create_sampling_session", json={"session_id": fake_session, "sampling_session_seq_id": 0,
                                                        "base_model": MODEL})  # fmt: skip
        assert r.status_code == 404 and "unknown session" in r.json()["error"]
        r = http.get(f"/samplers/{fake_session}:sample:0")
        assert r.status_code == 404 and "unknown sampling session" in r.json()["error"]
        # Promise ids of another engine process read as lost; others stay unknown.
        r = http.post("/retrieve_future", json={"request_id": "00000000-optim_step-3"})
        assert r.status_code == 404 and "lost" in r.json()["error"]
        r = http.post("/retrieve_future", json={"request_id": "00000000-sample-4"})
        assert r.status_code == 410
        r = http.post("/retrieve_future", json={"request_id": "nope"})
        assert r.status_code == 404 and "unknown request_id" in r.json()["error"]


def test_journal_stays_bounded(tmp_path):
    """Dropped snapshots leave the journal; what survives a restart is still capped; a finished
    session takes its journal with it."""
    from tbconsole.engine import EmbeddedEngine
    from tbconsole.engine.sampler_sessions import MAX_SNAPSHOTS_PER_RUN

    live = tmp_path / "live"
    prompt, params = types.ModelInput.from_ints([1, 2, 3]), types.SamplingParams(max_tokens=2, stop=[])
    with EmbeddedEngine(data_dir=tmp_path) as first:
        service = tinker.ServiceClient(base_url=first.base_url, api_key=first.api_key)
        tc = service.create_lora_training_client(base_model=MODEL, rank=2).result()
        samplers = [tc.save_weights_and_get_sampling_client().result() for _ in range(MAX_SNAPSHOTS_PER_RUN + 3)]
        assert len(list((live / "samplers").glob("*.safetensors"))) == MAX_SNAPSHOTS_PER_RUN
        port = first.port
    with EmbeddedEngine(data_dir=tmp_path, port=port) as second:  # same port: same SDK clients
        assert second.engine.status()["samplers"] == MAX_SNAPSHOTS_PER_RUN
        assert len(samplers[-1].sample(prompt, 1, params).result().sequences[0].tokens) == 2
        with pytest.raises(tinker.NotFoundError, match="unknown sampling session"):
            samplers[0].sample(prompt, 1, params).result()
        tc.save_weights_and_get_sampling_client().result()  # one more: the oldest kept one goes
        assert len(list((live / "samplers").glob("*.safetensors"))) == MAX_SNAPSHOTS_PER_RUN
        assert list((live / "runs").iterdir())
        service.close("success").result()
        assert not [p for d in ("sessions", "runs", "samplers") for p in (live / d).iterdir()]


def test_stale_sessions_are_pruned_at_startup(tmp_path):
    from tbconsole.common import atomic
    from tbconsole.engine.journal import STALE_AFTER_S, Journal

    j = Journal(tmp_path)
    for sid, age in (("tbc-00000000000a", 0), ("tbc-00000000000b", STALE_AFTER_S + 60)):
        j.add_session(sid, {})
        j.create_run(f"{sid}:train:0", {"lora": {"rank": 1}})
        j.save_sampler(f"{sid}:sample:0", {"kind": "base"}, None)
        old = time.time() - age
        os.utime(tmp_path / "sessions" / f"{sid}.json", (old, old))
    j.create_run("tbc-00000000000c:train:0", {})  # its session is gone
    (tmp_path / "samplers" / ".half-written.json.tmp").write_text("{")  # left by older versions
    atomic.temp_name(tmp_path / "runs" / "tbc-00000000000a:train:0" / "state.safetensors").write_text("")
    Journal(tmp_path).prune()
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [
        "meta.json", "tbc-00000000000a.json", "tbc-00000000000a:sample:0.json"]  # fmt: skip
