"""Polling until a condition holds."""

import asyncio
import time
from collections.abc import Callable

import pytest


def wait_until(predicate: Callable[[], object], timeout: float, what: Callable[[], str]) -> None:
    """Poll ``predicate`` until it holds; fail with ``what()`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(what())


async def wait_until_async(condition: Callable[[], bool], what: str, timeout: float = 30, poll: float = 0.05) -> None:
    """Wait (without blocking the loop) until ``condition()`` holds; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"still not true after {timeout:g} s: {what}")
        await asyncio.sleep(poll)
