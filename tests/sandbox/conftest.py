import pytest


@pytest.fixture
def root(sandbox_root):
    """The sandbox tests' name for the shared per-test sandbox root."""
    return sandbox_root
