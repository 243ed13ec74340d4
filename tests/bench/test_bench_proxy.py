"""`tbconsole bench proxy` runs end to end (a smoke test with tiny settings; figures are not checked)."""

import argparse
import tempfile

import pytest

from tbconsole.bench import proxy as bench

pytestmark = pytest.mark.e2e


def test_bench_proxy_smoke(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the bench's scratch folder goes
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    args = parser.parse_args(["--turns", "3", "--concurrency", "1,2", "--render-reps", "1", "--no-gc-freeze"])
    assert bench.run(args) == 0
    out = capsys.readouterr().out
    assert "proxy time - sampler time" in out and "bare aiohttp" in out
    assert "60" in out and "incremental" in out and "ratio" in out
    assert list(tmp_path.iterdir()) == []  # its captures went with it
