"""The Market Analyst: the agentloops worked example.

A router sends quick looks to a ReWOO flash briefing and analysis to Plan-and-Execute
deep research; a fresh-context evaluator votes on the draft; a person approves before
anything is published. Tools read a fixture data set (not live market data). Run it as
`python examples/market_analyst.py "Quick snapshot of NVDA"`.
"""
