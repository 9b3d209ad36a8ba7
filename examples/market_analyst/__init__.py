"""The Market Analyst: the agentloops worked example.

A router sends clear quick looks to a ReWOO flash briefing, and analysis or unclear
requests to Plan-and-Execute deep research (with re-planning); the research loop's final
answer is a typed report (`output_type=`: buy / hold / sell, thesis, risks, key figures
citing their evidence), its figures checked by an `output_validator`; a fresh-context
evaluator votes on it; a person approves,
edits or rejects before anything is published. An investor profile and the archive of
published reports (full-text searchable) live in the same SQLite file as the runs.
Tools read a fixture data set (not live market data). Run it as
`.venv/bin/python examples/market_analyst.py "Quick snapshot of NVDA"`.
"""
