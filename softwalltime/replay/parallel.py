"""Run simulations in forked processes that get their inputs as arguments.

:func:`fork_map` calls ``func(shared, task)`` for each task. The ``shared`` value (the
workloads, the options) is an argument of each worker :class:`multiprocessing.Process`:
with the ``fork`` start method it reaches the child as the parent holds it, not pickled,
and no module global carries it. The tasks and their results go through queues.
"""

from __future__ import annotations

import multiprocessing
import pickle
import queue
import traceback
from typing import Any, Callable, List, Optional, Sequence, TypeVar

S = TypeVar("S")
T = TypeVar("T")
R = TypeVar("R")

Done = Callable[[int], None]
"""Called with the number of tasks done so far, after each one."""

POLL_S = 1.0  # how often the parent checks that its workers are alive while it waits


def fork_map(
    func: Callable[[S, T], R],
    shared: S,
    tasks: Sequence[T],
    jobs: int = 1,
    done: Optional[Done] = None,
) -> List[R]:
    """``func(shared, task)`` of each task, in the tasks' order: in ``min(jobs, len(tasks))``
    forked processes when that is more than one, else here.

    :raises: what ``func`` raised (the first one the parent hears of); RuntimeError when a
        worker process died without an answer
    """
    if jobs <= 1 or len(tasks) <= 1:
        out = []
        for task in tasks:
            out.append(func(shared, task))
            if done is not None:
                done(len(out))
        return out
    ctx = multiprocessing.get_context("fork")
    todo: Any = ctx.SimpleQueue()
    back: Any = ctx.Queue()
    workers = [
        ctx.Process(target=_work, args=(func, shared, todo, back), daemon=True)
        for _ in range(min(jobs, len(tasks)))
    ]
    for worker in workers:
        worker.start()
    try:
        for item in enumerate(tasks):
            todo.put(item)
        for _ in workers:
            todo.put(None)
        return _collect(back, workers, len(tasks), done)
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
            worker.join()


def _collect(back: Any, workers: List[Any], count: int, done: Optional[Done]) -> List[Any]:
    """The workers' answers, in the tasks' order."""
    results: List[Any] = [None] * count
    for got in range(1, count + 1):
        gone = False  # every worker had ended at the last check (an answer may still come)
        while True:
            try:
                k, ok, value = back.get(timeout=POLL_S)
                break
            except queue.Empty:
                if gone or any(w.exitcode not in (None, 0) for w in workers):
                    raise RuntimeError("a simulation process died") from None
                gone = all(w.exitcode is not None for w in workers)
        if not ok:
            raise value
        results[k] = value
        if done is not None:
            done(got)
    return results


def _work(func: Callable[[Any, Any], Any], shared: Any, todo: Any, back: Any) -> None:
    # A worker: the tasks until the None that ends them; an error ends it after its answer.
    while True:
        item = todo.get()
        if item is None:
            return
        k, task = item
        try:
            back.put((k, True, func(shared, task)))
        except BaseException as err:  # noqa: BLE001 - handed to the parent, which raises it
            back.put((k, False, _picklable(err)))
            return


def _picklable(err: BaseException) -> BaseException:
    """The error itself when it crosses a pipe, else a RuntimeError with its traceback."""
    try:
        pickle.loads(pickle.dumps(err))
    except Exception:  # noqa: BLE001 - any failure to pickle
        text = "".join(traceback.format_exception(type(err), err, err.__traceback__))
        return RuntimeError(f"a simulation failed:\n{text}")
    return err
