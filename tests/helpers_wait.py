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


def ingest_lock_released(dsn, timeout=30.0):
    """Wait until no session holds the ingester's advisory lock; whether none does. A
    killed ingester's PostgreSQL backend ends only when it notices its client is gone, and
    holds the lock until then: a run started at once finds it held, does nothing and exits
    0 ("another ingest is running"), as a cron run must."""
    from softwalltime_ingest.load import Loader, connect

    loader = Loader(connect(dsn))  # one session for every look, not one per poll
    try:
        return wait_until(lambda: loader.lock_holder() is None, timeout)
    finally:
        loader.close()
