"""Long runs against servers with a small window (tests/_window_fakes.py): without
compaction a typed `ContextWindowExceeded` with the partial run; with it the runs answer,
no request passes the window, and every request is a valid transcript. ReAct (both
providers, both drivers, streamed), ReWOO (its evidence) and Plan-and-Execute."""

from __future__ import annotations

import itertools
import json
from typing import Any

import _window_fakes
import anthropic
import httpx
import pytest
import respx
from _window_fakes import (
    AnthropicServer,
    OpenAIServer,
    anthropic_call,
    anthropic_text,
    is_summary,
    openai_call,
    openai_text,
)

from agentloops import (
    AnthropicModel,
    Compaction,
    ContextCompacted,
    ContextWindowExceeded,
    OpenAICompatModel,
    PlanAndExecute,
    ReActLoop,
    ReWOOPipeline,
    tool,
)
from agentloops.messages import validate_transcript

BASE = "http://llm.test/v1"
PAGES = 12
N_CTX = 4096  # with the client's default max_tokens (1024): 3072 tokens of prompt


@tool
def fetch(page: int) -> str:
    """Fetch one page of the report."""
    return f"page {page}: " + "revenue grew in the quarter. " * 60  # about 1,700 characters


def react_reply(pages: int = PAGES) -> Any:
    """Fetch pages 0..pages-1, one a step, then answer; summarise when asked."""
    steps = itertools.count()

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        if is_summary(body):
            return openai_text("Fetched the first pages; revenue grew in each.")
        i = next(steps)
        if i < pages:
            return openai_call(f"call_{i}", "fetch", {"page": i})
        return openai_text("done: revenue grew")

    return reply


def openai_model(server: OpenAIServer, router: respx.MockRouter) -> OpenAICompatModel:
    router.post("/chat/completions").mock(side_effect=server)
    return OpenAICompatModel(BASE, "m", sleep=lambda s: None)


def test_react_without_compaction_raises_with_the_partial_run() -> None:
    server = OpenAIServer(N_CTX, react_reply())
    with respx.mock(base_url=BASE) as router:
        loop = ReActLoop(openai_model(server, router), [fetch], max_steps=PAGES + 2)
        with pytest.raises(ContextWindowExceeded) as info:
            loop.run("Read the report and say how revenue went.")
    assert (info.value.limit, server.refused) == (N_CTX, 1)
    result = info.value.result
    assert result.model_calls == len(server.prompts) and result.tool_calls >= 3
    validate_transcript(result.messages, allow_pending=True)


@pytest.mark.parametrize("summarize", [True, False])
def test_react_with_compaction_answers_within_the_window(summarize: bool) -> None:
    server = OpenAIServer(N_CTX, react_reply())
    events: list[Any] = []
    with respx.mock(base_url=BASE) as router:
        loop = ReActLoop(
            openai_model(server, router),
            [fetch],
            max_steps=PAGES + 2,
            compaction=Compaction(N_CTX, keep_last=2, summarize=summarize),
            on_event=events.append,
        )
        result = loop.run("Read the report and say how revenue went.")
    assert result.answer == "done: revenue grew"
    assert server.refused == 0
    assert max(server.prompts) + 1024 <= N_CTX
    # The run's own transcript keeps every turn; only the model's view was compacted.
    assert len(result.messages) == 1 + 2 * PAGES + 1 and result.tool_calls == PAGES
    compacted = [e for e in events if isinstance(e, ContextCompacted)]
    assert compacted and all(e.tokens_after < e.tokens_before for e in compacted)
    summaries = sum(1 for b in server.bodies if is_summary(b))
    assert bool(summaries) == summarize
    assert result.model_calls == PAGES + 1 + summaries  # the summary calls are counted
    roles = [e.role for e in events if type(e).__name__ == "ModelCallFinished"]
    assert roles.count("compactor") == summaries


def test_the_task_and_the_last_turns_reach_the_model_as_they_were() -> None:
    server = OpenAIServer(N_CTX, react_reply())
    with respx.mock(base_url=BASE) as router:
        loop = ReActLoop(
            openai_model(server, router),
            [fetch],
            max_steps=PAGES + 2,
            compaction=Compaction(N_CTX, keep_last=2),
        )
        loop.run("Read the report and say how revenue went.")
    last = [b for b in server.bodies if not is_summary(b)][-1]["messages"]
    task = next(m for m in last if m["role"] == "user")
    assert task["content"].startswith("Read the report and say how revenue went.")
    tool_messages = [m for m in last if m["role"] == "tool"]
    assert tool_messages[-1]["content"] == fetch.fn(PAGES - 1)  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_react_under_arun_and_astream() -> None:
    for streamed in (False, True):
        server = OpenAIServer(N_CTX, react_reply())
        with respx.mock(base_url=BASE) as router:
            loop = ReActLoop(
                openai_model(server, router), [fetch], max_steps=PAGES + 2, compaction=N_CTX
            )
            if streamed:
                items = [item async for item in loop.astream("Read the report.")]
                result = items[-1]
            else:
                result = await loop.arun("Read the report.")
        assert result.answer == "done: revenue grew" and server.refused == 0
        assert all(b["stream"] is streamed for b in server.bodies)


def test_react_streamed_under_the_sync_driver() -> None:
    server = OpenAIServer(N_CTX, react_reply())
    with respx.mock(base_url=BASE) as router:
        loop = ReActLoop(
            openai_model(server, router), [fetch], max_steps=PAGES + 2, compaction=N_CTX
        )
        items = list(loop.stream("Read the report."))
    assert items[-1].answer == "done: revenue grew" and server.refused == 0
    assert "ContextCompacted" in {type(e).__name__ for e in items}


# -- Anthropic -----------------------------------------------------------------------------


def anthropic_reply(pages: int = PAGES) -> Any:
    steps = itertools.count()

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        if is_summary(body):
            return anthropic_text("Fetched the first pages; revenue grew in each.")
        i = next(steps)
        if i < pages:
            return anthropic_call(f"toolu_{i}", "fetch", {"page": i}, f"I need page {i}.")
        return anthropic_text("done: revenue grew")

    return reply


def claude(anthropic_api: respx.MockRouter, server: AnthropicServer) -> AnthropicModel:
    anthropic_api.post("/v1/messages").mock(side_effect=server)
    client = anthropic.Anthropic(api_key="test-key", max_retries=0)
    return AnthropicModel("claude-test", client=client, max_tokens=1024)


def test_anthropic_without_compaction_raises(anthropic_api: respx.MockRouter) -> None:
    server = AnthropicServer(N_CTX - 1024, anthropic_reply())
    loop = ReActLoop(claude(anthropic_api, server), [fetch], max_steps=PAGES + 2)
    with pytest.raises(ContextWindowExceeded) as info:
        loop.run("Read the report and say how revenue went.")
    assert info.value.limit == N_CTX - 1024 and info.value.result.tool_calls >= 3


def test_anthropic_with_compaction_keeps_thinking_and_pairs(
    anthropic_api: respx.MockRouter,
) -> None:
    server = AnthropicServer(N_CTX - 1024, anthropic_reply())
    loop = ReActLoop(
        claude(anthropic_api, server),
        [fetch],
        max_steps=PAGES + 2,
        compaction=Compaction(N_CTX, keep_last=2),
    )
    result = loop.run("Read the report and say how revenue went.")
    assert result.answer == "done: revenue grew" and server.refused == 0
    # The fake checked every request: pairs, alternation, thinking unchanged.
    assert len(server.thinking) == PAGES


@pytest.mark.anyio
async def test_anthropic_with_compaction_under_arun(anthropic_api: respx.MockRouter) -> None:
    server = AnthropicServer(N_CTX - 1024, anthropic_reply())
    loop = ReActLoop(claude(anthropic_api, server), [fetch], max_steps=PAGES + 2, compaction=N_CTX)
    result = await loop.arun("Read the report.")
    assert result.answer == "done: revenue grew" and server.refused == 0


def test_anthropic_streamed_with_compaction(anthropic_api: respx.MockRouter) -> None:
    server = AnthropicServer(N_CTX - 1024, anthropic_reply())
    loop = ReActLoop(claude(anthropic_api, server), [fetch], max_steps=PAGES + 2, compaction=N_CTX)
    items = list(loop.stream("Read the report."))
    assert items[-1].answer == "done: revenue grew" and server.refused == 0
    assert all(b.get("stream") for b in server.bodies)
    assert len(server.thinking) == PAGES  # every thinking block went back as it came
    assert any(isinstance(e, ContextCompacted) for e in items)


# -- a refusal despite the count -------------------------------------------------------------


def test_a_refusal_despite_the_count_compacts_harder_and_retries_once() -> None:
    # A tokenizer far denser than the estimate, and replies that never say what they
    # counted: the count undershoots, the server refuses, the view is compacted harder.
    server = OpenAIServer(N_CTX, react_reply(), usage=False)
    with respx.mock(base_url=BASE) as router, pytest.MonkeyPatch.context() as patch:
        patch.setattr(_window_fakes, "CHARS_PER_TOKEN", 2)
        events: list[Any] = []
        loop = ReActLoop(
            openai_model(server, router),
            [fetch],
            max_steps=PAGES + 2,
            compaction=Compaction(N_CTX),
            on_event=events.append,
        )
        result = loop.run("Read the report.")
    assert result.answer == "done: revenue grew"
    assert server.refused >= 1
    reasons = [e.reason for e in events if isinstance(e, ContextCompacted)]
    assert "context_window" in reasons
    assert len(result.messages) == 1 + 2 * PAGES + 1


# -- ReWOO: the solver's evidence ---------------------------------------------------------------


def rewoo_reply(steps: int) -> Any:
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        if is_summary(body):
            return openai_text("summary")
        if "response_format" in body:  # the planner
            plan = {
                "steps": [
                    {
                        "step_id": f"#E{i + 1}",
                        "description": f"read page {i}",
                        "tool_name": "fetch",
                        "tool_args": {"page": i},
                    }
                    for i in range(steps)
                ]
            }
            return openai_text(json.dumps(plan))
        return openai_text("revenue grew on every page")

    return reply


def test_rewoo_solver_evidence_is_cut_to_fit() -> None:
    for compaction in (None, Compaction(N_CTX)):
        server = OpenAIServer(N_CTX, rewoo_reply(8))
        events: list[Any] = []
        with respx.mock(base_url=BASE) as router:
            pipeline = ReWOOPipeline(
                openai_model(server, router),
                [fetch],
                max_plan_steps=8,
                compaction=compaction,
                on_event=events.append,
            )
            if compaction is None:
                with pytest.raises(ContextWindowExceeded) as info:
                    pipeline.run("How did revenue go?")
                assert len(info.value.result.evidence) == 8  # the evidence was gathered
                continue
            result = pipeline.run("How did revenue go?")
        assert result.answer == "revenue grew on every page" and server.refused == 0
        solver = server.bodies[-1]["messages"][-1]["content"]
        assert "characters cut to fit the context window" in solver
        assert solver.count("#E") >= 8  # every step is still named
        assert any(isinstance(e, ContextCompacted) and e.cut for e in events)


# -- Plan-and-Execute: each step's ReAct loop and the reporter ------------------------------------


def plan_execute_reply() -> Any:
    fetched = itertools.count()

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        if is_summary(body):
            return openai_text("Fetched pages; revenue grew.")
        if "response_format" in body:  # the planner
            plan = {
                "steps": [
                    {"step_number": 1, "description": "read pages 0-7"},
                    {"step_number": 2, "description": "read pages 8-15"},
                ]
            }
            return openai_text(json.dumps(plan))
        system = body["messages"][0]["content"]
        if "tools" not in body:  # the reporter
            return openai_text("report: revenue grew")
        done = sum(1 for m in body["messages"] if m["role"] == "tool")
        del system
        i = next(fetched)
        if i % 9 < 8:
            return openai_call(f"call_{i}", "fetch", {"page": i})
        assert done >= 0
        return openai_text("read them: revenue grew")

    return reply


def test_plan_execute_steps_are_compacted() -> None:
    for compaction in (None, Compaction(N_CTX, keep_last=2)):
        server = OpenAIServer(N_CTX, plan_execute_reply())
        with respx.mock(base_url=BASE) as router:
            agent = PlanAndExecute(
                openai_model(server, router),
                [fetch],
                max_plan_steps=2,
                max_step_iterations=12,
                compaction=compaction,
            )
            if compaction is None:
                with pytest.raises(ContextWindowExceeded) as info:
                    agent.run("How did revenue go?")
                assert info.value.result is not None
                continue
            result = agent.run("How did revenue go?")
        assert result.answer == "report: revenue grew" and server.refused == 0
        assert result.tool_calls == 16


def test_the_fake_refuses_a_transcript_with_a_result_missing() -> None:
    server = OpenAIServer(N_CTX, react_reply())
    call = {"id": "c1", "type": "function", "function": {"name": "fetch", "arguments": "{}"}}
    body = {
        "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [call]}]
    }
    request = httpx.Request("POST", f"{BASE}/chat/completions", json=body)
    with pytest.raises(AssertionError, match="no results"):
        server(request)


def test_one_call_refused_despite_the_count_fits_by_the_servers_own_numbers() -> None:
    # A solver's one call, a tokenizer far denser than the estimate, and no usage to learn
    # from: the count says it fits, the server says how much it counted, and the evidence
    # is cut by that much.
    server = OpenAIServer(N_CTX, rewoo_reply(6), usage=False)
    with respx.mock(base_url=BASE) as router, pytest.MonkeyPatch.context() as patch:
        patch.setattr(_window_fakes, "CHARS_PER_TOKEN", 1)
        events: list[Any] = []
        pipeline = ReWOOPipeline(
            openai_model(server, router),
            [fetch],
            max_plan_steps=6,
            compaction=N_CTX,
            on_event=events.append,
        )
        result = pipeline.run("How did revenue go?")
    assert result.answer == "revenue grew on every page"
    assert server.refused == 1
    reasons = [e.reason for e in events if isinstance(e, ContextCompacted)]
    assert reasons[-1] == "context_window"


# -- count=True: the client's own count near the budget -------------------------------------


def counting_model(server: OpenAIServer, router: respx.MockRouter, counted: list[int]) -> Any:
    """An OpenAI-compatible model whose server also serves vLLM's `/tokenize`, counting as
    the server's own tokenizer does (`counted` gets every count asked)."""

    def tokenize(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        count = _window_fakes.tokens_of(body["messages"]) + _window_fakes.tokens_of(
            body.get("tools", [])
        )
        counted.append(count)
        return httpx.Response(200, json={"count": count, "max_model_len": N_CTX})

    router.post("/chat/completions").mock(side_effect=server)
    router.post("http://llm.test/tokenize").mock(side_effect=tokenize)
    return OpenAICompatModel(BASE, "m", sleep=lambda s: None)


@pytest.mark.parametrize("count", [False, True])
def test_with_count_the_servers_own_count_decides_before_sending(count: bool) -> None:
    # The same dense tokenizer and silent usage as above: the estimate alone undershoots
    # and the server refuses; asked near the budget, its own count keeps every request in.
    server, counted = OpenAIServer(N_CTX, react_reply(), usage=False), []
    with (
        respx.mock(base_url=BASE, assert_all_called=False) as router,
        pytest.MonkeyPatch.context() as patch,
    ):
        patch.setattr(_window_fakes, "CHARS_PER_TOKEN", 2)
        events: list[Any] = []
        loop = ReActLoop(
            counting_model(server, router, counted),
            [fetch],
            max_steps=PAGES + 2,
            compaction=Compaction(N_CTX, count=count),
            on_event=events.append,
        )
        result = loop.run("Read the report.")
    assert result.answer == "done: revenue grew"
    reasons = {e.reason for e in events if isinstance(e, ContextCompacted)}
    if count:
        assert server.refused == 0 and counted and reasons  # compacted, never refused
    else:
        assert server.refused >= 1 and not counted


def test_a_resumed_run_reads_its_counts_from_the_journal() -> None:
    from agentloops import MemoryStore

    store, counted = MemoryStore(), []
    with respx.mock(base_url=BASE) as router, pytest.MonkeyPatch.context() as patch:
        patch.setattr(_window_fakes, "CHARS_PER_TOKEN", 2)
        server = OpenAIServer(N_CTX, react_reply(), usage=False)

        def build() -> ReActLoop:
            return ReActLoop(
                counting_model(server, router, counted),
                [fetch],
                max_steps=PAGES + 2,
                compaction=Compaction(N_CTX, count=True),
                store=store,
            )

        first = build().run("Read the report.", run_id="r1")
        asked, sent = len(counted), list(server.bodies)
        assert first.answer == "done: revenue grew" and asked
        checked = [r for r in store.read("r1") if r.kind == "output_checked"]
        assert len(checked) == asked  # each count journaled
        # Replayed from the journal (the run ended: nothing is asked again, no count either).
        assert build().status("r1").answer == first.answer
        assert len(counted) == asked and server.bodies == sent
