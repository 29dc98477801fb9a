"""Waiting for a condition in tests: poll it against a deadline, never a fixed sleep."""

import time


def wait_until(condition, timeout=5.0):
    """Poll ``condition`` until it gives something true or ``timeout`` seconds passed: its
    last value. What a server or another process does arrives when it does: no fixed sleep
    fits."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(0.002)
