"""The one background loop every periodic part of a replica runs (webhook.service.Loop): a step
every `every` seconds or at once when woken, told which; a failing step reported and the loop
going on; stopped by `stop` (its thread joined) or when `until` holds."""

from __future__ import annotations

import queue
import threading

from webhook.service import Loop


def test_a_woken_loop_steps_at_once_and_says_it_was_woken():
    steps: queue.Queue[bool] = queue.Queue()
    loop = Loop("test-loop", steps.put, 3600, lambda: None)
    loop.start()
    try:
        loop.wake()
        assert steps.get(timeout=5) is True
    finally:
        loop.stop()
    assert not loop.running


def test_a_loop_steps_every_interval_unwoken():
    steps: queue.Queue[bool] = queue.Queue()
    loop = Loop("test-loop", steps.put, 0.01, lambda: None)
    loop.start()
    try:
        assert steps.get(timeout=5) is False
    finally:
        loop.stop()


def test_a_failing_step_is_reported_and_the_loop_goes_on():
    failures: queue.Queue[str] = queue.Queue()
    done = threading.Event()
    turns = iter([ValueError("first"), None])

    def step(_: bool) -> None:
        error = next(turns, None)
        if error is not None:
            raise error
        done.set()

    def failed() -> None:  # runs inside the handler: the exception is at hand
        import sys

        failures.put(str(sys.exc_info()[1]))

    loop = Loop("test-loop", step, 3600, failed)
    loop.start()
    try:
        loop.wake()
        assert failures.get(timeout=5) == "first"
        loop.wake()
        assert done.wait(5)
    finally:
        loop.stop()


def test_a_loop_ends_when_until_holds_and_stop_needs_no_wait():
    steps: list[bool] = []
    loop = Loop("test-loop", steps.append, 3600, lambda: None, until=lambda: True)
    loop.start()
    loop.wake()
    loop.stop()  # joined: the thread ended on its own first, or on the stop
    assert steps == [] and not loop.running
    never_started = Loop("test-loop", steps.append, 3600, lambda: None)
    never_started.stop()  # nothing to join
    assert not never_started.running
