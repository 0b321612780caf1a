"""Layer 1, rules and model: pure values and the rules over them.

The Flow and Step model and its rows, validation, retry policies, the wait planner,
close rules, reset points, the search query language, limits, errors and the requests
sent to Workers. Nothing here holds engine state or does I/O; every other layer may
use it.
"""
