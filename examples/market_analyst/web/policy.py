"""The policy every answer carries: what the page may load and run, and where.

The page is one HTML file, one script and one stylesheet from this server, talking to its
own API (`fetch` and `EventSource`): the Content-Security-Policy allows exactly that, so
markup that slipped into a rendered report could run no script, load nothing from
elsewhere and send nothing away. The page has no inline script or style element and
sets no `style` attribute in markup (its script sets widths through the DOM, which the
policy allows); the rendered Markdown's table alignment arrives as classes (see
`views.to_html`).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",  # the empty favicon is a data: URL
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


class SecurityHeaders:
    """ASGI middleware: adds `HEADERS` to every HTTP answer, refusals and errors too."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *HEADERS]}
            await send(message)

        await self.app(scope, receive, with_headers)
