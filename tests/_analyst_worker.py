"""A second process for tests/examples/test_market_analyst_leases.py: it holds a Market Analyst run,
or works on a trade until a chosen model call, where it stops and waits to be killed.

    python tests/_analyst_worker.py hold STATE_DIR RUN_ID TTL
    python tests/_analyst_worker.py propose STATE_DIR RUN_ID TTL BLOCK_AT [BUDGET]
    python tests/_analyst_worker.py decide STATE_DIR TRADE_ID TTL BLOCK_AT

`hold` takes the run's lease (renewed in the background) and prints `{"held": holder}`.
`propose` and `decide` run the trader on the offline stand-in; at the trader's model call
number BLOCK_AT (1 is the first one this process makes) they print `{"blocked": n}` and
never return. Either way the process then waits for the test to kill it.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from market_analyst import journal, tools
from market_analyst.demo_model import DemoModel
from market_analyst.roles import role_of
from market_analyst.store import AnalystStore, fold
from market_analyst.trading import Trader

from agentloops import LeaseKeeper, ModelRequest, ModelResponse


def say(**what: object) -> None:
    print(json.dumps(what), flush=True)


class BlocksAt:
    """The offline stand-in, except that the trader's call number `at` never returns."""

    def __init__(self, at: int):
        self.demo, self.at, self.calls = DemoModel(), at, 0

    def complete(self, request: ModelRequest) -> ModelResponse:
        if role_of(request) == "trader":
            self.calls += 1
            if self.calls == self.at:
                say(blocked=self.calls)
                threading.Event().wait()  # until killed
        return self.demo.complete(request)


def main() -> None:
    command, state, target, ttl = sys.argv[1], Path(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    store = AnalystStore(state, state / "reports", lease_ttl=ttl, label="worker")
    tools.configure(latency_scale=0, ledger_path=store.ledger_path)
    if command == "hold":
        lease = store.runs.acquire(target, ttl=ttl, holder=journal.holder_id("worker"))
        with LeaseKeeper(store.runs, lease):
            say(held=lease.holder, record=fold(target, store.runs.read(target))["status"])
            threading.Event().wait()
    trader = Trader(BlocksAt(int(sys.argv[5])), store)
    if command == "propose":
        budget = float(sys.argv[6]) if len(sys.argv) > 6 else None
        trade, _ = trader.propose(target, by="worker", budget_usd=budget)
    else:
        trade, _ = trader.decide(target, True, by="worker", via="worker")
    say(done=trade["status"])


if __name__ == "__main__":
    main()
