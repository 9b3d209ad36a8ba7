"""The journal replay corpus: recorded runs that today's code must still resume."""
