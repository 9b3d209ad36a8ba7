"""`python -m agentloops`: the command line over a run store (see `agentloops.cli`).

Rule: it only calls `agentloops.cli.main`; the commands live there.
"""

from agentloops.cli import main

raise SystemExit(main())
