"""Context that never overflows: `Compaction`, a middleware that keeps the model's view of a
run within its context window (`compaction=` on the loops is a shorthand for it).

Before each model call it counts the request (an estimate per message, kept as the
transcript grows, calibrated by the input tokens the server reported for the previous
call); when the request and its reply's `max_tokens` would pass `max_context_tokens`, the
view is compacted (`compaction._view`: old tool outputs elided, then the older turns
summarised by a model call of role "compactor", then the longest texts cut) down to
`target` of the window, and stays as it is, growing, until the next compaction. A
`ContextWindowExceeded` despite the count compacts once more, harder, and retries once.
The run's own transcript, its result and its journal keep every turn.

Rule: built on the middleware seam, as a user's middleware would be; no loop, no driver.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from agentloops.compaction._summary import summary_request
from agentloops.compaction._view import View
from agentloops.engine.effects import CheckOutput, Machine
from agentloops.errors import ConfigurationError, ModelError
from agentloops.events import ContextCompacted
from agentloops.messages import Message
from agentloops.middleware import Middleware, MiddlewareContext
from agentloops.model import ModelRequest, ModelResponse, estimate_frame_tokens
from agentloops.providers import _window as window

__all__ = ["Compaction", "with_compaction"]

DEFAULT_RESERVE = 1024
"""Tokens kept for the reply when neither the request nor the client says its
`max_tokens`."""
_MAX_VIEWS = 64
"""Transcripts followed per run at once (a Plan-and-Execute run has one per step)."""
_HARDER = 1.25
"""How much more the count is trusted to undercount after a `ContextWindowExceeded`."""
_MOST = 4.0
"""The most tokens the server may count per token estimated (a sanity bound)."""


class Compaction(Middleware):
    """Keep every model request of a run within `max_context_tokens`.

    Args:
        max_context_tokens: the model's context window, in tokens: the prompt and the
            reply's `max_tokens` together, as servers count it (8192 for a local model
            started with `--n_ctx 8192`).
        keep_last: the newest turns (an assistant message and the results it got) kept
            as they are when older ones are compacted (at least 1).
        summarize: replace the older turns with a summary written by the run's model (a
            call of role "compactor", journaled and counted like any); `False` leaves
            them out with a note saying how many.
        target: the share of the window a compaction brings the request down to, so
            that it is not compacted again at the next step (0 < target < 1).
        reserve: tokens kept for the reply (default: the request's `max_tokens`, else the
            client's, else 1024).
        summary_max_tokens: the summary call's `max_tokens`.
        elide_over: tool outputs longer than this many characters are elided first.
        count: at a transcript's first request and near the budget (from `near` of it
            up), ask the client's own count of the request before sending it (its
            `count_tokens`: Anthropic's count-tokens endpoint, a server's tokenizer),
            learn from it, and compact when that count is over. The
            count is outside data: the driver asks it and a durable run journals it like
            an outcome, so a replay reads the same number and sends the same requests.
            Off by default: a count is one more round trip near the budget, and the
            estimate, calibrated on the usage every reply reports, decides alone.
        near: the share of the budget from which `count` asks (0 < near <= 1).

    Examples:
        >>> from agentloops import ReActLoop
        >>> from agentloops.testing import ScriptedModel
        >>> loop = ReActLoop(ScriptedModel(["4"]), [], compaction=Compaction(8192))
        >>> loop.run("What is 2 + 2?").answer
        '4'
    """

    def __init__(
        self,
        max_context_tokens: int,
        *,
        keep_last: int = 4,
        summarize: bool = True,
        target: float = 0.6,
        reserve: int | None = None,
        summary_max_tokens: int = 512,
        elide_over: int = 200,
        count: bool = False,
        near: float = 0.85,
    ):
        if max_context_tokens < 256:
            raise ConfigurationError(f"max_context_tokens must be >= 256, got {max_context_tokens}")
        if keep_last < 1:
            raise ConfigurationError(f"keep_last must be >= 1, got {keep_last}")
        if not 0 < target < 1:
            raise ConfigurationError(f"target must be between 0 and 1, got {target}")
        if reserve is not None and not 0 <= reserve < max_context_tokens // 2:
            raise ConfigurationError(
                f"reserve must be >= 0 and under half of max_context_tokens, got {reserve}"
            )
        self.max_context_tokens = max_context_tokens
        self.keep_last = keep_last
        self.summarize = summarize
        self.target = target
        self.reserve = reserve
        self.summary_max_tokens = summary_max_tokens
        self.elide_over = elide_over
        if not 0 < near <= 1:
            raise ConfigurationError(f"near must be above 0 and at most 1, got {near}")
        self.count = count
        self.near = near

    def __repr__(self) -> str:
        return f"Compaction({self.max_context_tokens}, keep_last={self.keep_last})"

    def fingerprint(self) -> Mapping[str, object]:
        return {
            "max_context_tokens": self.max_context_tokens,
            "keep_last": self.keep_last,
            "summarize": self.summarize,
            "target": self.target,
            "reserve": self.reserve,
            "summary_max_tokens": self.summary_max_tokens,
            "elide_over": self.elide_over,
            "count": self.count,
            "near": self.near,
        }

    # -- the hooks ---------------------------------------------------------------------------

    def before_model(
        self, request: ModelRequest, ctx: MiddlewareContext
    ) -> ModelRequest | Machine[ModelRequest]:
        live = request.messages
        view = _follow(ctx.state, live)
        sent = view.sync(live)
        frame = _frame(ctx.state, request)
        budget = self.max_context_tokens - self._reserve(request, ctx)
        tokens = view.tokens(frame)
        if tokens > budget:
            return self._compacting(request, live, view, ctx, budget, "budget")
        near = tokens >= budget * self.near or not view.sent_estimate  # or the first
        if self.count and near and _counts(ctx.client):
            return self._counted(request, live, view, sent, frame, ctx, budget)
        return self._sending(request, live, view, sent, frame, ctx)

    def after_model(
        self, request: ModelRequest, response: ModelResponse, ctx: MiddlewareContext
    ) -> ModelResponse:
        found = ctx.state.get("sent", {}).get(id(request.messages))
        usage = response.usage
        counted = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        if found is not None and found[0] is request.messages and counted:
            view = found[1]
            if view.sent_estimate > 0 and response.usage_reported:
                view.ratio = min(max(counted / view.sent_estimate, 0.5), _MOST)
                ctx.state["ratio"] = view.ratio  # where the run's next transcripts start
        return response

    def on_model_error(
        self, request: ModelRequest, error: ModelError, ctx: MiddlewareContext
    ) -> Machine[ModelRequest | None] | None:
        if error.kind != "context_window":
            return None
        found = ctx.state.get("sent", {}).get(id(request.messages))
        if found is None or found[0] is not request.messages:
            return None
        view, live = found[1], found[2]
        # Trust the count less; as much less as the server's own count says, when its
        # error gives one (read from the message, which a replayed journal keeps too).
        told, _ = window.numbers(str(error))
        said = told / view.sent_estimate if told and view.sent_estimate else 0.0
        view.ratio = min(max(view.ratio * _HARDER, said), _MOST)
        ctx.state["ratio"] = max(ctx.state.get("ratio", 1.0), view.ratio)
        budget = self.max_context_tokens - self._reserve(request, ctx)
        original = dataclasses.replace(request, messages=live)
        return self._compacting(original, live, view, ctx, budget, "context_window", hard=True)

    # -- compacting ----------------------------------------------------------------------------

    def _compacting(
        self,
        request: ModelRequest,
        live: list[Message],
        view: View,
        ctx: MiddlewareContext,
        budget: int,
        reason: str,
        *,
        hard: bool = False,
    ) -> Machine[Any]:
        """Compact `view` (the model's view of `live`) down to the target; the request to
        send (`None`: nothing could be compacted after a `ContextWindowExceeded`)."""
        frame = _frame(ctx.state, request)
        before = view.tokens(frame)
        keep = 1 if hard else self.keep_last
        goal = int(budget * (self.target * 0.75 if hard else self.target))
        elided = view.elide(live, keep, self.elide_over)
        summarized = cut = 0
        if view.tokens(frame) > goal:
            older = view.older(live, keep)
            if older:
                summary = None
                if self.summarize:
                    summary = yield from self._summary(view, live, older, ctx)
                summarized = view.splice(live, keep, summary)
        if view.tokens(frame) > goal:
            cut = view.cut_texts(live, view.tokens(frame) - goal)
        after = view.tokens(frame)
        if not (elided or summarized or cut):
            if hard:
                return None
            return self._sending(request, live, view, view.current(live), frame, ctx)
        ctx.emit(
            ContextCompacted(
                loop=ctx.loop,
                run_id=ctx.run_id,
                parent_run_id=ctx.parent_run_id,
                step=ctx.step,
                role=request.role,
                reason=reason,
                tokens_before=before,
                tokens_after=after,
                max_context_tokens=self.max_context_tokens,
                elided=elided,
                summarized=summarized,
                cut=cut,
            )
        )
        return self._sending(request, live, view, view.current(live), frame, ctx)

    def _summary(
        self, view: View, live: list[Message], older: list[Message], ctx: MiddlewareContext
    ) -> Machine[str | None]:
        """A summary of `older` by the run's model, or `None` when it fails or is empty."""
        room = int((self.max_context_tokens - self.summary_max_tokens - 256) / view.ratio)
        asked = summary_request(
            view.current(live)[0],
            older,
            budget_tokens=room,
            max_tokens=self.summary_max_tokens,
        )
        try:
            response: ModelResponse = yield from ctx.call_model(asked, role="compactor")
        except ModelError:
            return None  # the turns are left out with a note instead
        return response.message.text.strip() or None

    def _counted(
        self,
        request: ModelRequest,
        live: list[Message],
        view: View,
        sent: list[Message],
        frame: int,
        ctx: MiddlewareContext,
        budget: int,
    ) -> Machine[ModelRequest]:
        """Near the budget: the client's own count of the request as it would go decides.
        The driver asks it (a `CheckOutput` effect: under `arun` the count runs on
        agentloops' pool) and a durable run journals the number, so a replay never asks
        again. The estimate learns from the count (as it does from a reply's usage):
        asked at the transcript's first request and near the budget, it keeps the
        estimate honest for a tokenizer denser than it assumes, and over the budget the
        view is compacted as far as the count says."""
        out = self._sending(request, live, view, sent, frame, ctx)
        counted = yield CheckOutput(_count, out, ctx.client, ctx.loop, ctx.run_id, ctx.step)
        if not isinstance(counted, int):
            return out
        if view.sent_estimate > 0:  # the estimate learns from the count, as from usage
            view.ratio = min(max(counted / view.sent_estimate, 0.5), _MOST)
            ctx.state["ratio"] = view.ratio
        if counted <= budget:
            return out
        compacted: ModelRequest = yield from self._compacting(
            request, live, view, ctx, budget, "count"
        )
        return compacted

    def _sending(
        self,
        request: ModelRequest,
        live: list[Message],
        view: View,
        sent: list[Message],
        frame: int,
        ctx: MiddlewareContext,
    ) -> ModelRequest:
        """The request with the view (the one built last step, while neither changed),
        remembered for the reply's calibration."""
        view.sent_estimate = view.estimate(frame)
        sending = ctx.state.setdefault("sent", {})
        known = sending.get(id(sent))
        if known is None or known[0] is not sent:
            sending[id(sent)] = (sent, view, live)
            while len(sending) > _MAX_VIEWS:
                del sending[next(iter(sending))]
        if sent is live:
            return request
        built = view.built
        if built is not None and built[0] is request and built[1].messages is sent:
            return built[1]  # type: ignore[no-any-return]
        out = dataclasses.replace(request, messages=sent)
        view.built = (request, out)
        return out

    def _reserve(self, request: ModelRequest, ctx: MiddlewareContext) -> int:
        if self.reserve is not None:
            return self.reserve
        if request.max_tokens:
            return request.max_tokens
        client = ctx.client
        known = ctx.state.get("reserve")
        if known is not None and known[0] is client:
            return int(known[1])
        limit = getattr(client, "max_tokens", None)
        value = limit if isinstance(limit, int) and limit > 0 else DEFAULT_RESERVE
        ctx.state["reserve"] = (client, value)
        return value


def _follow(state: dict[str, Any], live: list[Message]) -> View:
    """The view of `live` (a new one for a transcript not seen before, calibrated as the
    run's last reply said: a planner's or a solver's one call has no reply of its own to
    go by)."""
    views: dict[int, tuple[list[Message], View]] = state.setdefault("views", {})
    found = views.get(id(live))
    if found is not None and found[0] is live:
        return found[1]
    view = View()
    view.ratio = max(1.0, state.get("ratio", 1.0))  # only ever more cautious
    views[id(live)] = (live, view)  # the list held: its id is not reused while it is here
    while len(views) > _MAX_VIEWS:
        del views[next(iter(views))]
    return view


def _frame(state: dict[str, Any], request: ModelRequest) -> int:
    """The estimate of the request's system prompt and tools, worked out again only when
    they change."""
    last = state.get("frame")
    if (
        last is not None
        and last[0] is request.system
        and last[1] is request.tools
        and last[2] is request.output
    ):
        return int(last[3])
    value = estimate_frame_tokens(request)
    state["frame"] = (request.system, request.tools, request.output, value)
    return value


def with_compaction(
    middleware: Iterable[Middleware], compaction: Compaction | int | None
) -> list[Middleware]:
    """A loop's chain: `middleware`, then `compaction` (an int is its `max_context_tokens`),
    innermost, so it counts the request as the other middleware leave it.

    Raises:
        ConfigurationError: `compaction` is neither a `Compaction` nor an int.
    """
    chain = list(middleware)
    if compaction is None:
        return chain
    if isinstance(compaction, bool) or not isinstance(compaction, int | Compaction):
        raise ConfigurationError(
            f"compaction must be a Compaction or a token count, got {compaction!r}"
        )
    return [*chain, compaction if isinstance(compaction, Compaction) else Compaction(compaction)]


def _counts(client: object) -> bool:
    """Whether the client counts tokens itself (`count_tokens`, `acount_tokens`)."""
    return callable(getattr(client, "count_tokens", None))


def _count(request: ModelRequest, client: Any) -> int:
    """The client's count of a request, as a `CheckOutput` validator `(value, context)`:
    its sync `count_tokens` (under `arun` the driver runs it on agentloops' pool)."""
    return int(client.count_tokens(request))
