"""The virtual clock: the order of calls at one instant, cancellation, processes."""

from __future__ import annotations

from plansim.sim.clock import Clock, Priority


def test_pass_ends_run_before_everything_else_due_at_the_same_instant():
    clock, seen = Clock(), []
    clock.call_at(5.0, lambda: seen.append("arrival"))
    clock.call_at(5.0, lambda: seen.append("pass end"), Priority.PASS_END)
    clock.call_at(5.0, lambda: seen.append("tick"))
    clock.run()
    assert seen == ["pass end", "arrival", "tick"]
    assert clock.now == 5.0


def test_a_call_scheduled_for_now_runs_after_those_already_due_now():
    # A pass start scheduled when an arrival kicks its rank runs after the arrivals already
    # queued for that instant: they join the same pass.
    clock, seen = Clock(), []

    def first_arrival():
        seen.append("arrival 1")
        clock.call_at(0.0, lambda: seen.append("pass start"))

    clock.call_at(3.0, first_arrival)
    clock.call_at(3.0, lambda: seen.append("arrival 2"))
    clock.run()
    assert seen == ["arrival 1", "arrival 2", "pass start"]


def test_a_cancelled_call_does_not_run_but_still_holds_its_slot():
    clock, seen = Clock(), []
    handle = clock.call_at(10.0, lambda: seen.append("stale end"), Priority.PASS_END)
    clock.call_at(4.0, lambda: seen.append("new end"), Priority.PASS_END)
    handle.cancel()
    assert handle.cancelled and clock.peek() == 4.0
    clock.run()
    assert seen == ["new end"] and clock.now == 10.0  # time reaches the cancelled slot


def test_a_process_starts_ahead_of_the_calls_due_then_and_steps_by_its_delays():
    clock, seen = Clock(), []
    clock.call_at(0.0, lambda: seen.append(("call", clock.now)))

    def sampler():
        for _ in range(3):
            seen.append(("sample", clock.now))
            yield 1000.0

    clock.process(sampler())
    clock.run()
    assert seen == [("sample", 0.0), ("call", 0.0), ("sample", 1000.0), ("sample", 2000.0)]
    assert clock.peek() == float("inf")


def test_time_is_the_float_sum_of_now_and_the_delay():
    clock, at = Clock(), []
    clock.call_at(0.1, lambda: clock.call_at(0.3 - 0.1, lambda: at.append(clock.now)))
    clock.run()
    assert at == [0.1 + (0.3 - 0.1)]  # 0.30000000000000004, as SimPy summed it
