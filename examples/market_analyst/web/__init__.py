"""The Market Analyst web app: `.venv/bin/python examples/market_analyst.py --web` (or `make web`).

A Starlette app (`app.create_app`) over the command line's store, with live runs on the
server's event loop (`live`), their events turned into a feed for the page (`feed`)
and sent as server-sent events (a run this server does not drive, or drove before a
restart, is fed from its journals: `replayed`), the stored records shaped for the page
(`views`), and the API's input checks (`guard`). `serve` binds 127.0.0.1 and runs
uvicorn. The page is `static/`: plain HTML, CSS and JavaScript, no build step. Needs the
`web` extra.
"""
