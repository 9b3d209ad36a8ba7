"""Run the Market Analyst example:
`.venv/bin/python examples/market_analyst.py "Quick snapshot of NVDA"`.

The code is in the `market_analyst/` package beside this file (this script's directory
is first on `sys.path`, and a package wins over a module of the same name).
"""

import sys

from market_analyst.cli import main

if __name__ == "__main__":
    sys.exit(main())
