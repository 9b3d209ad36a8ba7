"""One ReAct run of N tool steps (the react_overhead contender), for an instruction count.

Under callgrind no other process on the machine moves the figure: the difference between
two run lengths, divided by the steps between them, is a step's cost in instructions.

    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python bench/react_steps.py 1000     # and 3000: (I refs 3000 - 1000) / 2000
"""

from __future__ import annotations

import sys

from react_overhead import prepare_agentloops

if __name__ == "__main__":
    steps = int(sys.argv[1])
    prepare_agentloops(10)()  # warm-up: first-call imports and caches
    prepare_agentloops(steps)()
