"""`GET /metrics` of `chainlang serve`: Prometheus text, by the official client library.

One registry per serve (not the library's global one), so that two servers in one
process (tests) do not share counts. Names follow Prometheus' conventions: a
`chainlang_` prefix, `_total` counters, durations in seconds.

With several workers (`serve --workers N`) the values live in files of a directory the
workers share (the client library's multiprocess mode, set by PROMETHEUS_MULTIPROC_DIR
before the library is imported), and any worker's `/metrics` adds them all up.

Every labelled counter has a sample for each label value the docs list from the start, at
0 (the client library makes a labelled series only when `labels(...)` is first called): a
rule like `increase(chainlang_failures_total[15m]) > 0` needs a sample before the first
failure to see it. The values are the lists below; a value not listed still gets counted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chainlang.runtime.emit import EmitResult

__all__ = ["CONTENT_TYPE", "Metrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"

# the label values each labelled counter starts with at 0 (the docs' table lists the same)
REJECT_REASONS = ("malformed", "invalid", "too_large", "unauthorized", "unknown_event", "not_external", "bad_key",
                  "wrong_host", "cross_origin", "unsupported_media_type", "body_timeout", "header_timeout",
                  "too_many_connections")
RUN_STATUSES = ("ok", "broken", "failed", "limit", "interrupted")  # how a run (an event's, a firing's) ends
HOOK_STATUSES = ("ok", "failed", "cancelled")
STEP_STATUSES = ("ok", "failed", "skipped", "cancelled")
FAILURE_KINDS = ("event", "task")


_KEPT_PID: list[int] = []  # this process's id, kept once multiprocess values use it (see _pid_kept_once)


def _kept_pid() -> int:
    return _KEPT_PID[0]


def _pid_kept_once() -> None:
    """Give the client library's multiprocess values a process id kept in memory.

    The library asks its process identifier on every update and read of every value (to
    notice a fork and start the child's own files): os.getpid, a system call, several times
    per event (CPython 3.11's asyncio makes more of them itself; those stay). The kept id is
    set again in a forked child before any of its code runs (os.register_at_fork), so the
    library still sees each fork and does what it did. Once per
    process: every metric made after it (the values class is looked up when a metric is made)
    shares one set of files, as with the library's own class."""
    import os

    from prometheus_client import values

    if _KEPT_PID or values.ValueClass is values.MutexValue:  # done, or the library was imported before the
        return                                                  # directory was set: it keeps its plain values
    _KEPT_PID.append(os.getpid())
    os.register_at_fork(after_in_child=lambda: _KEPT_PID.__setitem__(0, os.getpid()))
    values.ValueClass = values.MultiProcessValue(process_identifier=_kept_pid)  # type: ignore[no-untyped-call]


class Metrics:
    def __init__(self) -> None:
        import os

        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

        disable_created_metrics()  # type: ignore[no-untyped-call]  # the *_created samples only double the output
        self.shared = bool(os.environ.get(MULTIPROCESS_ENV))
        if self.shared:
            _pid_kept_once()

        self.registry = CollectorRegistry()
        r = self.registry
        self.events = Counter("chainlang_events_total", "External events taken, by event and how their hooks ended",
                              ["event", "status"], registry=r)
        self.rejected = Counter("chainlang_events_rejected_total", "Requests refused, by reason", ["reason"],
                                registry=r)
        self.duplicates = Counter("chainlang_events_duplicate_total",
                                  "Events whose Idempotency-Key was seen before (nothing ran)", registry=r)
        self.firings = Counter("chainlang_hook_firings_total", "Hooks fired for external events, by how they ended",
                               ["status"], registry=r)
        self.runs = Counter("chainlang_task_runs_total", "Firings of scheduled tasks, by final status", ["status"],
                            registry=r)
        self.failures = Counter("chainlang_failures_total", "Event runs and task runs that did not end ok",
                                ["kind"], registry=r)
        self.steps = Counter("chainlang_steps_total", "Steps run (by hook actions and task firings), by status",
                             ["status"], registry=r)
        self.event_seconds = Histogram("chainlang_event_duration_seconds",
                                       "From an event's transcript opening to its last action's end",
                                       buckets=_SECONDS, registry=r)
        self.run_seconds = Histogram("chainlang_task_run_duration_seconds", "How long a task's firing ran",
                                     buckets=_SECONDS, registry=r)
        self.lateness = Histogram("chainlang_task_lateness_seconds", "How late a due task started",
                                  buckets=_SECONDS, registry=r)
        self.queue = Gauge("chainlang_tasks_due", "Tasks due and not yet started (queue depth), at the last scrape",
                           registry=r, multiprocess_mode="mostrecent")
        self.active = Gauge("chainlang_running", "Event runs and task firings running now", registry=r,
                            multiprocess_mode="livesum")
        # set by the scheduler (the tasks worker, with --workers: the others keep 0, hence max)
        self.quarantined = Gauge("chainlang_tasks_quarantined",
                                 "Stored tasks whose row cannot be read (quarantined: never fired)", registry=r,
                                 multiprocess_mode="max")
        for counter, name, values in ((self.rejected, "reason", REJECT_REASONS), (self.firings, "status", HOOK_STATUSES),
                                      (self.runs, "status", RUN_STATUSES), (self.failures, "kind", FAILURE_KINDS),
                                      (self.steps, "status", STEP_STATUSES)):
            for value in values:
                counter.labels(**{name: value})  # the series exists, at 0, before its first increment

    def emitted(self, event: str, result: "EmitResult", seconds: float) -> None:
        self.events.labels(event=event, status=result.status).inc()
        if result.status not in ("ok", "duplicate"):
            self.failures.labels(kind="event").inc()
        for item in result.fired:
            self.firings.labels(status=str(item.get("status"))).inc()
        if seconds:
            self.event_seconds.observe(seconds)

    def fired(self, status: str, seconds: float, late: float) -> None:
        self.runs.labels(status=status).inc()
        if status not in ("ok", "broken"):
            self.failures.labels(kind="task").inc()
        self.run_seconds.observe(seconds)
        self.lateness.observe(max(0.0, late))

    def text(self) -> bytes:
        from prometheus_client import CollectorRegistry, generate_latest

        if not self.shared:
            return generate_latest(self.registry)
        from prometheus_client.multiprocess import MultiProcessCollector

        every = CollectorRegistry()
        MultiProcessCollector(every)  # type: ignore[no-untyped-call]
        return generate_latest(every)

    def value(self, name: str, **labels: Any) -> float:
        """One sample's value (tests and the final summary); 0 when it has none yet."""
        found = self.registry.get_sample_value(name, labels or None)
        return float(found) if found is not None else 0.0
