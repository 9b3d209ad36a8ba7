"""Context that never overflows: the model's view of a run kept within its context window.

Rule: no loop, no driver.
"""
