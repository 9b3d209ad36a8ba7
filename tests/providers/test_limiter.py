"""`RateLimiter`: many runs, sync and async, kept within one key's limits on a fake clock;
waiting rather than failing; `Retry-After`; the window shared through PostgreSQL."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from agentloops import (
    ConfigurationError,
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    RateLimiter,
    ReActLoop,
    TextDelta,
    Usage,
)
from agentloops.journal import MemoryStore
from agentloops.testing import FunctionModel, ScriptedModel, respond

REQUEST = ModelRequest("", [Message.user("q")])


class FakeClock:
    """Virtual time: a sleep moves the clock to when the sleeper wakes (never back)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.lock = threading.Lock()
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        with self.lock:
            self.slept.append(seconds)
            self.now = max(self.now, self.now + seconds)

    async def asleep(self, seconds: float) -> None:
        target = self.now + seconds  # read now: the limiter asked with this clock reading
        self.slept.append(seconds)
        await asyncio.sleep(0)
        self.now = max(self.now, target)


def most_in_any_window(times: list[float], window: float) -> int:
    times = sorted(times)
    return max(sum(1 for t in times if start <= t < start + window) for start in times)


def recording(clock: FakeClock, tokens: int = 0) -> tuple[FunctionModel, list[float]]:
    starts: list[float] = []

    def answer(request: ModelRequest) -> ModelResponse:
        starts.append(clock())
        return respond("ok", usage=Usage(input_tokens=tokens))

    return FunctionModel(answer), starts


def test_200_concurrent_aruns_never_pass_the_requests_limit_and_none_fails() -> None:
    clock = FakeClock()
    model, starts = recording(clock)
    limited = RateLimiter(
        model, requests_per_minute=20, clock=clock, sleep=clock.sleep, async_sleep=clock.asleep
    )
    loop = ReActLoop(limited, [])

    async def main() -> list[Any]:
        return await asyncio.gather(*(loop.arun(f"task {i}") for i in range(200)))

    results = asyncio.run(main())
    assert [r.stop_reason for r in results] == ["answered"] * 200
    assert len(starts) == 200
    assert most_in_any_window(starts, 60.0) == 20  # at the limit, never past it
    assert max(starts) >= 9 * 60  # 200 calls at 20 a minute need ten windows
    assert limited.running == 0


def test_200_concurrent_aruns_within_a_tokens_limit_and_a_concurrency_limit() -> None:
    clock = FakeClock()
    in_flight, most = [0], [0]

    async def answer(request: ModelRequest) -> ModelResponse:
        in_flight[0] += 1
        most[0] = max(most[0], in_flight[0])
        await asyncio.sleep(0)
        in_flight[0] -= 1
        return respond("ok", usage=Usage(input_tokens=90, output_tokens=10))

    limited = RateLimiter(
        FunctionModel(answer),
        tokens_per_minute=1000,
        max_concurrent=5,
        clock=clock,
        sleep=clock.sleep,
        async_sleep=clock.asleep,
    )
    loop = ReActLoop(limited, [])

    async def main() -> list[Any]:
        return await asyncio.gather(*(loop.arun(f"task {i}") for i in range(200)))

    results = asyncio.run(main())
    assert all(r.answer == "ok" for r in results)
    assert most[0] <= 5
    # 100 tokens a call, 1,000 a minute: at most 10 calls finish per window, plus those
    # in flight when the limit was reached (at most max_concurrent)
    assert clock.now >= 60 * (200 // (10 + 5) - 1)


def test_threads_share_the_limit_with_the_event_loop() -> None:
    clock = FakeClock()
    model, starts = recording(clock)
    limited = RateLimiter(
        model, requests_per_minute=10, clock=clock, sleep=clock.sleep, async_sleep=clock.asleep
    )
    loop = ReActLoop(limited, [])
    with ThreadPoolExecutor(8) as pool:
        sync_runs = [pool.submit(loop.run, f"t{i}") for i in range(30)]

        async def main() -> list[Any]:
            return await asyncio.gather(*(loop.arun(f"a{i}") for i in range(20)))

        async_results = asyncio.run(main())
        sync_results = [f.result() for f in sync_runs]
    assert all(r.answer == "ok" for r in [*sync_results, *async_results])
    assert len(starts) == 50
    assert most_in_any_window(starts, 60.0) <= 10


def test_max_concurrent_holds_threads_until_a_place_frees() -> None:
    in_flight, most = [0], [0]
    lock = threading.Lock()

    def answer(request: ModelRequest) -> ModelResponse:
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        time.sleep(0.01)
        with lock:
            in_flight[0] -= 1
        return respond("ok")

    limited = RateLimiter(FunctionModel(answer), max_concurrent=2)
    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(lambda _: limited.complete(REQUEST), range(16)))
    assert len(replies) == 16 and most[0] == 2


def test_a_429_pauses_every_caller_for_its_retry_after_then_tries_again() -> None:
    clock = FakeClock()
    starts: list[float] = []
    refused = [True]

    def answer(request: ModelRequest) -> ModelResponse:
        starts.append(clock())
        if refused[0]:
            refused[0] = False
            raise ModelError("slow down", status=429, retry_after=7.0)
        return respond("ok")

    limited = RateLimiter(FunctionModel(answer), clock=clock, sleep=clock.sleep)
    assert limited.complete(REQUEST).message.text == "ok"
    assert starts == [0.0, 7.0]
    assert limited.complete(REQUEST).message.text == "ok"


def test_a_429_that_keeps_coming_is_raised_after_max_rate_limited() -> None:
    clock = FakeClock()
    model = ScriptedModel([ModelError("slow down", status=429)] * 3)
    limited = RateLimiter(model, max_rate_limited=2, clock=clock, sleep=clock.sleep)
    with pytest.raises(ModelError, match="slow down"):
        limited.complete(REQUEST)
    assert model.calls == 3 and clock.slept == [1.0, 1.0]  # no Retry-After: a second


def test_other_failures_are_raised_at_once_and_free_their_place() -> None:
    limited = RateLimiter(ScriptedModel([ModelError("bad", status=400), "ok"]), max_concurrent=1)
    with pytest.raises(ModelError, match="bad"):
        limited.complete(REQUEST)
    assert limited.running == 0
    assert limited.complete(REQUEST).message.text == "ok"


def test_streams_hold_their_place_until_they_end() -> None:
    clock = FakeClock()
    limited = RateLimiter(ScriptedModel(["hello there"]), max_concurrent=1, clock=clock)
    items = limited.stream(REQUEST)
    first = next(items)
    assert isinstance(first, TextDelta) and limited.running == 1
    rest = list(items)
    assert isinstance(rest[-1], ModelResponse) and limited.running == 0


def test_an_async_stream_is_limited_too() -> None:
    clock = FakeClock()
    model, starts = recording(clock)
    limited = RateLimiter(
        model, requests_per_minute=1, clock=clock, sleep=clock.sleep, async_sleep=clock.asleep
    )

    async def main() -> list[list[Any]]:
        async def one() -> list[Any]:
            return [i async for i in limited.astream(REQUEST)]

        return await asyncio.gather(one(), one())

    streams = asyncio.run(main())
    assert all(isinstance(s[-1], ModelResponse) for s in streams)
    assert starts == [0.0, 60.0]


def test_a_rate_limited_stream_waits_before_its_first_delta_only() -> None:
    clock = FakeClock()
    script: list[Any] = [ModelError("slow", status=429, retry_after=2.0), "ok"]
    limited = RateLimiter(ScriptedModel(script), clock=clock, sleep=clock.sleep)
    assert list(limited.stream(REQUEST))[-1].message.text == "ok"

    class Breaks:
        def complete(self, request: ModelRequest) -> ModelResponse:  # pragma: no cover
            raise NotImplementedError

        def stream(self, request: ModelRequest) -> Iterator[Any]:
            yield TextDelta(text="x")
            raise ModelError("slow", status=429)

    with pytest.raises(ModelError, match="slow"):
        list(RateLimiter(Breaks(), clock=clock, sleep=clock.sleep).stream(REQUEST))


def test_wrap_puts_a_second_client_under_the_same_limits() -> None:
    clock = FakeClock()
    first_model, starts = recording(clock)
    second_model = FunctionModel(lambda r: (starts.append(clock()), respond("b"))[1])
    first = RateLimiter(first_model, requests_per_minute=2, clock=clock, sleep=clock.sleep)
    second = first.wrap(second_model)
    for client in (first, second, first, second):
        client.complete(REQUEST)
    assert starts == [0.0, 0.0, 60.0, 60.0]
    assert repr(second) == "RateLimiter(FunctionModel, requests_per_minute=2)"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"requests_per_minute": 0},
        {"tokens_per_minute": -1},
        {"max_concurrent": 0},
        {"window": 0},
        {"max_rate_limited": -1},
    ],
)
def test_limits_that_make_no_sense_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        RateLimiter(ScriptedModel([]), **kwargs)


def test_only_a_postgres_store_shares_a_limit_and_it_needs_a_name() -> None:
    with pytest.raises(ConfigurationError, match="PostgresStore"):
        RateLimiter(ScriptedModel([]), store=MemoryStore(), name="key")


def test_prices_pass_through() -> None:
    model = ScriptedModel([])
    model.model = "claude-haiku-4-5"  # type: ignore[attr-defined]
    assert RateLimiter(model).prices()["claude-haiku-4-5"] is not None


# -- shared through PostgreSQL --------------------------------------------------------------


def test_two_processes_limiters_share_one_window_in_postgres(postgres_conninfo: str) -> None:
    from agentloops.journal import PostgresStore

    with PostgresStore(postgres_conninfo) as store:
        with pytest.raises(ConfigurationError, match="name"):
            RateLimiter(ScriptedModel([]), store=store)
        starts: list[float] = []
        lock = threading.Lock()

        def answer(request: ModelRequest) -> ModelResponse:
            with lock:
                starts.append(time.monotonic())
            return respond("ok", usage=Usage(output_tokens=1))

        # two limiters with budgets of their own: as two worker processes would have
        workers = [
            RateLimiter(
                FunctionModel(answer), requests_per_minute=3, window=1.0, store=store, name="key-1"
            )
            for _ in range(2)
        ]
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda i: workers[i % 2].complete(REQUEST), range(8)))
    assert len(starts) == 8
    # three per second between them, not three each (a little slack for the two clocks)
    assert most_in_any_window(starts, 0.95) <= 3
    assert max(starts) - min(starts) >= 1.9  # 8 calls at 3 a second need three windows


def test_a_shared_tokens_limit_in_postgres(postgres_conninfo: str) -> None:
    from agentloops.journal import PostgresStore

    with PostgresStore(postgres_conninfo) as store:
        window = store.rate_window("tokens-key")
        assert window.admit(None, 10, 1.0) == 0.0
        window.spend(10)
        wait = window.admit(None, 10, 1.0)
        assert 0.5 < wait <= 1.0  # the 10 tokens age out a second after they were spent
        time.sleep(wait + 0.05)
        assert window.admit(None, 10, 1.0) == 0.0


def test_a_wait_past_the_calls_time_left_is_a_timeout_not_a_wait() -> None:
    clock = FakeClock()
    seen: list[float | None] = []

    def answer(request: ModelRequest) -> ModelResponse:
        seen.append(request.timeout)
        return respond("ok")

    limited = RateLimiter(
        FunctionModel(answer), requests_per_minute=1, clock=clock, sleep=clock.sleep
    )
    limited.complete(REQUEST)
    short = ModelRequest("", [Message.user("q")], timeout=5.0)
    with pytest.raises(ModelError, match=r"past the 5\.0 s") as info:
        limited.complete(short)
    assert info.value.kind == "timeout" and clock.slept == []  # a run's deadline wins
    long = ModelRequest("", [Message.user("q")], timeout=100.0)
    limited.complete(long)
    assert clock.slept == [60.0] and seen[-1] == 40.0  # the wait came off its time


def test_an_async_wait_for_a_place_gives_up_at_the_calls_time() -> None:
    async def main() -> None:
        gate = asyncio.Event()

        async def answer(request: ModelRequest) -> ModelResponse:
            await gate.wait()
            return respond("ok")

        limited = RateLimiter(FunctionModel(answer), max_concurrent=1)
        first = asyncio.create_task(limited.acomplete(REQUEST))
        await asyncio.sleep(0)
        short = ModelRequest("", [Message.user("q")], timeout=0.05)
        with pytest.raises(ModelError, match="past the") as info:
            await limited.acomplete(short)
        assert info.value.kind == "timeout"
        gate.set()
        assert (await first).message.text == "ok"

    asyncio.run(main())


def test_a_thread_waiting_for_a_place_gives_up_at_the_calls_time() -> None:
    gate = threading.Event()

    def answer(request: ModelRequest) -> ModelResponse:
        gate.wait()
        return respond("ok")

    limited = RateLimiter(FunctionModel(answer), max_concurrent=1)
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(limited.complete, REQUEST)
        while limited.running == 0:
            time.sleep(0.001)
        with pytest.raises(ModelError, match="past the"):
            limited.complete(ModelRequest("", [Message.user("q")], timeout=0.05))
        gate.set()
        assert first.result().message.text == "ok"
