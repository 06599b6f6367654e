"""How a step calls its tool so that the step (and the run) always ends, whatever the tool does.

- A **sync tool** never runs on the event loop: it runs in a worker thread. The threads
  are daemon threads, kept in a pool and reused (no thread is started per call; at most
  MAX_WORKERS run calls at once, more wait for one). The loop thread waits up to SPIN
  for the call to end (a quick call costs one thread hop and no trip through the event
  loop); then it goes back to the event loop, and the step awaits a future that the
  thread settles through `loop.call_soon_threadsafe`. When the step stops waiting (its
  `timeout`, the run's timeout, a cancellation)
  the call is **abandoned**: Python cannot stop a thread, so the function runs on until it
  returns, what it returns is dropped, and what it does through `ctx` from then on is
  ignored (`ctx.now()` raises `CallAbandoned`). A daemon thread never keeps the process
  alive.
- An **async tool** is awaited in the step's own task, through `guarded`: when the task is
  cancelled, the tool gets the cancellation as usual; a tool that ignores it (catches
  `CancelledError` and goes on) has `GRACE` seconds to end, after which it is abandoned:
  its coroutine is no longer resumed, and the step goes on with the cancellation.

`Watch` tells the step what happened to its call. `run_loop` is `asyncio.run` with an
end that waits for nothing a tool left behind for more than GRACE seconds, and
`left_behind()` tells the CLI whether anything abandoned may still be alive (then it
exits with `os._exit`, after flushing).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import os
import queue
import signal
import threading
import time
import types
from collections import deque
from typing import Any, Callable, Coroutine, Generator, TypeVar

from chainlang.runtime import watchdog
from chainlang.runtime.inline import LoopTimeout

T = TypeVar("T")

#: seconds an async tool has to end once it is cancelled; then it is abandoned
GRACE = 1.0
#: seconds the loop thread waits for a sync tool's call to end before it goes back to the event loop
SPIN = 0.0002
#: worker threads running calls that are not abandoned; more calls wait for one
MAX_WORKERS = 64
#: seconds an idle worker thread waits for a call before it ends
IDLE_SECONDS = 60.0


class CallAbandoned(RuntimeError):
    """Raised in an abandoned sync tool's thread when it asks the run for something (`ctx.now()`)."""


class Watch:
    """One attempt's call. Before it: `deadline`, when the loop watchdog must interrupt tool
    code that holds the loop (time.monotonic; None: never), and `own`, the step's own
    deadline, if any (the other is the run's limits.timeout). After it: `abandoned` is
    "thread" when a sync tool's thread was left running, "task" when an async tool ignored
    its cancellation."""

    __slots__ = ("abandoned", "deadline", "own")

    def __init__(self) -> None:
        self.abandoned: str | None = None
        self.deadline: float | None = None
        self.own: float | None = None

    def until(self, own: float | None, limits: tuple[asyncio.Timeout, ...]) -> None:
        """Set the deadlines from the step's timeout (`own`, in loop time) and the run's."""
        loop_time = asyncio.get_running_loop().time()
        now = time.monotonic()
        whens = [when for limit in limits if (when := limit.when()) is not None]
        if own is not None:
            self.own = own - loop_time + now
            whens.append(own)
        if whens:
            self.deadline = min(whens) - loop_time + now


# --------------------------------------------------------------------------- sync tools: worker threads

_NEW, _QUEUED, _RUNNING, _DONE, _ABANDONED, _DROPPED = range(6)
_OUTCOME, _DO, _ASK = range(3)  # what a call's thread hands to the loop thread
_OVER = "the step is over, or stopped waiting for this call: it was abandoned"


class Call:
    """One sync tool call, from the step that awaits it to the thread that runs it.

    What the thread hands to the loop thread (its outcome, and what the tool asks of the
    run through `ctx`) goes first through `channel`, which the loop thread reads while it
    waits up to SPIN for a quick call to end (the common case costs no trip through the
    event loop); after that, through `loop.call_soon_threadsafe`, and the step awaits
    `future`. Either way in order: a progress report is recorded before the outcome."""

    __slots__ = ("func", "kwargs", "loop", "loop_thread", "context", "state", "channel", "future", "closed", "_mode",
                 "took")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.loop_thread = threading.get_ident()
        self.context = contextvars.copy_context()  # the step's context variables, as asyncio.to_thread gives them
        self.state = _NEW
        self.func: Callable[..., Any] | None = None
        self.kwargs: dict[str, Any] = {}
        self.channel: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self.future: asyncio.Future[Any] | None = None  # once the loop thread stopped reading `channel`
        self.closed = False  # the step is done with this call (it has its outcome, or stopped waiting)
        self._mode = threading.Lock()  # held to switch from `channel` to the event loop
        self.took: float | None = None  # seconds the function ran, once it returned

    @property
    def over(self) -> bool:
        """What the tool asks of the run through `ctx` from now on is not done: its step
        is over, or stopped waiting for it."""
        return self.closed or self.state == _ABANDONED or self.state == _DROPPED

    # -- in the worker thread

    def run(self) -> tuple[Any, ...]:
        """Call the function: the outcome, for `post`."""
        func, kwargs = self.func, self.kwargs
        self.func, self.kwargs = None, {}
        ok = True
        start = time.perf_counter()
        try:
            assert func is not None
            result = self.context.run(func, **kwargs)
        except StopIteration as exc:  # a future cannot hold it (as a coroutine raising it would)
            ok, result = False, RuntimeError(f"the tool raised StopIteration: {exc}")
        except BaseException as exc:  # the step decides what a failure means
            ok, result = False, exc
        self.took = time.perf_counter() - start
        return (_OUTCOME, ok, result)

    def post(self, item: tuple[Any, ...]) -> None:
        """Hand `item` to the loop thread."""
        with self._mode:
            if self.future is None:
                self.channel.put(item)
                return
        try:
            self.loop.call_soon_threadsafe(self._handle, item)
        except RuntimeError:  # the loop is closed: the run is over, nobody waits for this call
            if item[0] == _ASK:
                item[2].set_exception(CallAbandoned("the run is over: this call was abandoned"))

    # -- in the loop thread

    def wait(self, spin: float) -> tuple[bool, Any] | None:
        """Read the channel for at most `spin` seconds: the outcome (ok, value), or None
        when the call goes on (then `future` has it, later)."""
        get, channel = self.channel.get, self.channel
        deadline = time.monotonic() + spin
        while True:
            left = deadline - time.monotonic()
            try:
                item = get(timeout=left) if left > 0 else channel.get_nowait()
            except queue.Empty:
                break
            if item[0] == _OUTCOME:
                return item[1], item[2]
            self._handle(item)
        with self._mode:
            self.future = self.loop.create_future()
        while True:  # what came before the switch
            try:
                item = channel.get_nowait()
            except queue.Empty:
                return None
            if item[0] == _OUTCOME:
                return item[1], item[2]
            self._handle(item)

    def _handle(self, item: tuple[Any, ...]) -> None:
        kind = item[0]
        if kind == _DO:
            if not self.over:
                item[1](*item[2])
        elif kind == _ASK:
            answer: concurrent.futures.Future[Any] = item[2]
            if self.over:
                answer.set_exception(CallAbandoned(_OVER))
                return
            try:
                answer.set_result(item[1]())
            except BaseException as exc:
                answer.set_exception(exc)
        else:
            future = self.future
            if future is None or future.done():  # the step stopped waiting
                return
            if item[1]:
                future.set_result(item[2])
            else:
                future.set_exception(item[2])

    # -- the tool's ctx, used from its thread

    def relay(self, func: Callable[..., None]) -> Callable[..., None]:
        """`func` for the tool's thread: it runs in the loop thread (in order with the
        call's outcome), and not at all once the call is over (abandoned)."""

        def relayed(*args: Any) -> None:
            if threading.get_ident() == self.loop_thread:
                if not self.over:
                    func(*args)
                return
            self.post((_DO, func, args))

        return relayed

    def ask(self, func: Callable[[], T]) -> Callable[[], T]:
        """`func` for the tool's thread: it runs in the loop thread and its answer is
        waited for; CallAbandoned once the call is over (abandoned)."""

        def asked() -> T:
            if threading.get_ident() == self.loop_thread:
                return func()
            if self.over:
                raise CallAbandoned(_OVER)
            answer: concurrent.futures.Future[T] = concurrent.futures.Future()
            self.post((_ASK, func, answer))
            return answer.result()

        return asked


class _Worker:
    """A daemon thread that runs calls, one at a time, until it has been idle a while."""

    __slots__ = ("pool", "inbox")

    def __init__(self, pool: "Workers") -> None:
        self.pool = pool
        self.inbox: queue.SimpleQueue[Call] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="chainlang-tool", daemon=True).start()

    def _serve(self) -> None:
        pool, inbox = self.pool, self.inbox
        while True:
            try:
                call = inbox.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                if pool._retire(self):
                    return
                continue  # a call is on its way
            current: Call | None = call
            while current is not None:
                outcome = current.run()
                after = pool._done(self, current)  # first: the loop thread gets the GIL back sooner
                current.post(outcome)
                del outcome
                current = after


class Workers:
    """The pool of worker threads: at most `limit` of them run calls that are not abandoned
    (more calls wait in a queue, or are dropped if their step stops waiting first)."""

    def __init__(self, limit: int = MAX_WORKERS) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._backlog: deque[Call] = deque()
        self._busy = 0  # calls running that are not abandoned
        self.abandoned = 0  # abandoned calls whose function has not returned yet

    def submit(self, call: Call) -> None:
        with self._lock:
            if self._busy >= self.limit:
                call.state = _QUEUED
                self._backlog.append(call)
                return
            self._busy += 1
            call.state = _RUNNING
            worker = self._idle.pop() if self._idle else None
        if worker is None:
            worker = _Worker(self)
        worker.inbox.put(call)

    def abandon(self, call: Call) -> bool:
        """The step stopped waiting for `call`: True when its function is still running
        (its thread is left behind), False when it had not started (it never will)."""
        with self._lock:
            if call.state == _QUEUED:
                self._backlog.remove(call)
                call.state = _DROPPED
                return False
            if call.state != _RUNNING:
                return False
            call.state = _ABANDONED
            self._busy -= 1
            self.abandoned += 1
            start = self._backlog.popleft() if self._backlog else None
            if start is not None:
                self._busy += 1
                start.state = _RUNNING
            worker = self._idle.pop() if start is not None and self._idle else None
        if start is not None:
            (worker or _Worker(self)).inbox.put(start)
        return True

    def _done(self, worker: _Worker, call: Call) -> Call | None:
        """In a worker thread, after a call: the next call for it, or None (it is idle)."""
        with self._lock:
            if call.state == _ABANDONED:
                self.abandoned -= 1
            else:
                self._busy -= 1
                call.state = _DONE
            if self._backlog and self._busy < self.limit:
                start = self._backlog.popleft()
                self._busy += 1
                start.state = _RUNNING
                return start
            self._idle.append(worker)
            return None

    def _retire(self, worker: _Worker) -> bool:
        with self._lock:
            if worker in self._idle:
                self._idle.remove(worker)
                return True
            return False  # just taken for a call


WORKERS = Workers()


def _after_fork() -> None:  # the child has none of the parent's threads
    global WORKERS
    WORKERS = Workers()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


async def in_thread(call: Call, watch: Watch) -> Any:
    """Run the prepared `call` in a worker thread and wait for its outcome: at first in
    the loop thread, for at most SPIN (a quick call costs no trip through the event loop),
    then on the event loop. When that wait is cancelled, the call is abandoned (and
    `watch` says whether a thread was left running)."""
    pool = WORKERS
    pool.submit(call)
    try:
        outcome = call.wait(SPIN)
        if outcome is not None:
            ok, value = outcome
            if ok:
                return value
            raise value
        assert call.future is not None
        try:
            return await call.future
        except asyncio.CancelledError:
            if pool.abandon(call):
                watch.abandoned = "thread"
            raise
    finally:
        call.closed = True


# --------------------------------------------------------------------------- async tools: the grace period

_ABANDONED_TASKS: list[Coroutine[Any, Any, Any]] = []  # kept, never resumed (closing them would run tool code)


class _Grace:
    """An async tool's grace period, from the first cancellation thrown into it. The task's
    cancellation requests above `baseline` are the ones meant for the step: a tool that
    handles its own (an `asyncio.timeout` inside it) withdraws them with `uncancel`."""

    __slots__ = ("task", "baseline", "deadline", "until", "timer", "expired")

    def __init__(self, task: "asyncio.Task[Any]") -> None:
        loop = asyncio.get_running_loop()
        self.task = task
        self.baseline = task.cancelling() - 1
        self.deadline = loop.time() + GRACE
        self.until = time.monotonic() + GRACE  # the same, for the loop watchdog
        self.expired = False  # the grace period is over: the next cancellation thrown in is its wake-up call
        self.timer: asyncio.TimerHandle | None = loop.call_at(self.deadline, self._expire)

    @property
    def pending(self) -> bool:
        """A cancellation meant for the step is still requested."""
        return self.task.cancelling() > self.baseline

    def _expire(self) -> None:
        self.timer = None
        if not self.task.done() and self.pending:
            self.expired = True
            self.task.cancel()  # to take the task back from the tool

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


@types.coroutine
def guarded(coro: Coroutine[Any, Any, T], watch: Watch) -> Generator[Any, Any, T]:
    """Await `coro` as `await coro` would, except when the step's task is cancelled: the
    tool gets the cancellation and has GRACE seconds to end. One still running then is
    abandoned (never resumed again; `watch.abandoned` is "task"). One that ends (returns,
    or raises something else) with the cancellation still requested (it swallowed it)
    does not keep the step from being cancelled. Either way the step gets CancelledError.
    Costs one generator frame per call, and nothing more until a cancellation comes."""
    steps: Any = coro if isinstance(coro, types.CoroutineType) else coro.__await__()
    send, throw = steps.send, steps.throw
    value: Any = None
    error: BaseException | None = None
    grace: _Grace | None = None
    try:
        while True:
            # the loop watchdog interrupts a tool that holds the loop past its deadline; once
            # cancelled, the tool cleans up within its grace period, the step's deadline being past
            until = watch.deadline if grace is None else grace.until
            try:
                if until is None:
                    yielded = send(value) if error is None else throw(error)
                else:
                    token = watchdog.arm(until)
                    try:
                        yielded = send(value) if error is None else throw(error)
                    finally:
                        watchdog.disarm(token)
            except watchdog.LoopBlocked as blocked:
                if watch.own is not None and blocked.deadline >= watch.own:
                    raise LoopTimeout() from None
                for _ in range(3):  # the run's deadline: its timer runs after this task's next step
                    yield None  # a bare yield (asyncio.sleep(0)): the cancellation comes in here
                raise LoopTimeout() from None
            except StopIteration as stop:
                if grace is not None and grace.pending:
                    raise asyncio.CancelledError() from None  # it returned, but the step was cancelled
                return stop.value  # type: ignore[no-any-return]
            except asyncio.CancelledError:
                raise
            except BaseException:
                if grace is not None and grace.pending:
                    raise asyncio.CancelledError() from None  # ditto, with another exception
                raise
            if grace is not None:
                if not grace.pending:  # what was thrown in was the tool's own (it withdrew it: uncancel)
                    grace.cancel()
                    grace = None
                elif asyncio.get_running_loop().time() >= grace.deadline:
                    break  # past its grace period without waiting on anything (a sleep(0) loop)
            try:
                value, error = (yield yielded), None
            except GeneratorExit:
                steps.close()
                raise
            except asyncio.CancelledError as exc:
                if grace is not None and grace.expired:  # the wake-up call: the grace period is over
                    grace.task.uncancel()
                    break
                value, error = None, exc
                if grace is None:
                    task = asyncio.current_task()
                    if task is not None:
                        grace = _Grace(task)
            except BaseException as exc:
                value, error = None, exc
    finally:
        if grace is not None:
            grace.cancel()
    _ABANDONED_TASKS.append(coro)
    watch.abandoned = "task"
    raise asyncio.CancelledError("the tool ignored its cancellation and was abandoned")


_STUCK_TASKS: list["asyncio.Task[Any]"] = []  # tasks still running when their loop was closed (see run_loop)


def left_behind() -> int:
    """How much that was abandoned is still alive: threads still running, coroutines never
    resumed, tasks that ignored their cancellation when the loop was closed."""
    return WORKERS.abandoned + len(_ABANDONED_TASKS) + len(_STUCK_TASKS)


def run_loop(main: Coroutine[Any, Any, T], name: str | None = None, awaited: str | None = None) -> T:
    """`asyncio.run(main)`, except that its end is bounded: the tasks still running (a
    tool may start some) are cancelled and get GRACE seconds to end, and the threads of
    the loop's default executor (`asyncio.to_thread` in a tool) GRACE seconds too; what is
    still running then is left behind (see `left_behind`). The first Ctrl-C (when the
    caller handles SIGINT the default way) cancels `main`, then KeyboardInterrupt is
    raised, as with asyncio.run.

    Called where an event loop runs already (a sync wrapper inside `async def`), it closes
    `main` unstarted and raises UsageError naming the async form to await: `name` is the
    sync wrapper's public name (e.g. "chainlang.run"), `awaited` its async form's (by
    default `name` + "_async"); without them both are derived from `main`."""
    if _loop_running():
        sync_name, async_name = _wrapper_names(main, name, awaited)
        main.close()  # never started: no "coroutine ... was never awaited" warning
        from chainlang.errors import UsageError

        raise UsageError(f"{sync_name}() was called inside a running event loop; use `await {async_name}(...)` "
                         "there (a sync wrapper cannot block the loop it is called from)")
    loop = asyncio.new_event_loop()
    executor = concurrent.futures.ThreadPoolExecutor(thread_name_prefix="asyncio")  # the default, kept at hand
    loop.set_default_executor(executor)
    asyncio.set_event_loop(loop)
    task = loop.create_task(main)
    interrupts = 0
    handler: Callable[[int, Any], None] | None = None
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler):

        def on_sigint(signum: int, frame: Any) -> None:
            nonlocal interrupts
            interrupts += 1
            if interrupts == 1 and not task.done():
                task.cancel()
                loop.call_soon_threadsafe(lambda: None)  # wake the loop up
                return
            raise KeyboardInterrupt()

        handler = on_sigint
        signal.signal(signal.SIGINT, handler)
    try:
        try:
            return loop.run_until_complete(task)
        except asyncio.CancelledError:
            if interrupts and task.uncancel() == 0:
                raise KeyboardInterrupt() from None
            raise
        finally:
            if handler is not None and signal.getsignal(signal.SIGINT) is handler:
                signal.signal(signal.SIGINT, signal.default_int_handler)
    finally:
        try:
            _end_tasks(loop)
            loop.run_until_complete(_within(loop.shutdown_asyncgens(), GRACE))
            # not loop.shutdown_default_executor(): it waits for every thread, however long
            ending = threading.Thread(target=executor.shutdown, name="chainlang-executor-end", daemon=True)
            ending.start()
            ending.join(GRACE)
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _wrapper_names(main: Coroutine[Any, Any, Any], name: str | None, awaited: str | None) -> tuple[str, str]:
    """The sync wrapper's name and its async form's: `chainlang.run` → `chainlang.run_async`;
    a method's sync form is `X_sync` of the coroutine method `X` (Chain.run_sync → chain.run)."""
    if name is not None:
        return name, awaited or f"{name}_async"
    code = getattr(main, "cr_code", None)
    qualname = str(getattr(code, "co_qualname", getattr(code, "co_name", "")) or "")
    if not qualname:
        return "a chainlang function", "its async form"
    if "." in qualname:  # a coroutine method: Chain.run is awaited as chain.run(...)
        owner, _, method = qualname.rpartition(".")
        owner = owner.rpartition(".")[2]
        return f"{owner}.{method}_sync", f"{owner[:1].lower()}{owner[1:]}.{method}"
    sync = qualname.removesuffix("_async")
    return f"chainlang.{sync}", f"chainlang.{sync}_async"


def _end_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the loop's tasks; those still running GRACE seconds later are left behind."""
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    if not tasks:
        return
    for t in tasks:
        t.cancel()
    loop.run_until_complete(asyncio.wait(tasks, timeout=GRACE))
    for t in tasks:
        if not t.done():
            _STUCK_TASKS.append(t)
        elif not t.cancelled() and t.exception() is not None:
            loop.call_exception_handler({"message": "unhandled exception in a task left running by a tool",
                                         "exception": t.exception(), "task": t})


async def _within(aw: Coroutine[Any, Any, None], seconds: float) -> None:
    try:
        await asyncio.wait_for(aw, seconds)
    except (TimeoutError, asyncio.TimeoutError):
        pass


__all__ = ["GRACE", "Call", "CallAbandoned", "Watch", "Workers", "guarded", "in_thread", "left_behind", "run_loop"]
