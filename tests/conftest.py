from pathlib import Path

import pytest

from tbconsole import offline

offline.apply_embedded_defaults()

REPO = Path(__file__).resolve().parents[1]
# CI and developer checkouts have the project's shared data beside the repo.
SHARED = REPO.parent / "shared"


def sandbox_problem() -> str | None:
    from tbconsole.sandbox.namespace import SandboxUnavailable, preflight

    try:
        preflight()
    except SandboxUnavailable as exc:
        return str(exc)
    return None


def pytest_collection_modifyitems(config, items):
    problem = sandbox_problem()
    if problem is None:
        return
    skip = pytest.mark.skip(reason=f"local sandbox unavailable here: {problem}")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def sandbox_root() -> Path:
    """A sandbox root of the test's own (not under /tmp, which a sandbox hides), checked empty
    at the end: every sandbox the test started must be gone."""
    import tempfile

    base = Path("/var/tmp/tbconsole-test-sandboxes")
    base.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(dir=base))
    yield path
    assert not any(path.iterdir()), f"sandbox folders left behind: {list(path.iterdir())}"
    path.rmdir()


@pytest.fixture
def tb2_sample() -> Path:
    path = SHARED / "tb2-sample"
    if not path.is_dir():
        pytest.skip(f"no Terminal-Bench 2 sample at {path}")
    return path


def pytest_sessionfinish(session, exitstatus):
    # SDK clients of engines that tests already stopped keep a heartbeat thread that would log
    # "connection error" warnings at interpreter exit, after the test summary.
    import logging

    logging.getLogger("tinker").setLevel(logging.CRITICAL)
