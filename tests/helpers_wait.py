"""Waiting for a condition in tests: poll it against a deadline, never a fixed sleep."""

import time


def wait_until(condition, timeout=5.0):
    """Poll ``condition`` until it is true or ``timeout`` seconds passed; its last value.
    What a server sends arrives asynchronously: no fixed sleep is long enough."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return condition()
        time.sleep(0.005)
    return True
