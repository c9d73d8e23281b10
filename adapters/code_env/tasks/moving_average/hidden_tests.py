"""Hidden tests of 'moving_average': data only. Read with ast.literal_eval, never imported or executed,
never copied where the agent or the sandbox can read it."""

CASES = [
    {"name": "pairs", "call": "moving_average", "args": ([1, 2, 3, 4], 2), "expect": [1.5, 2.5, 3.5]},
    {"name": "single", "call": "moving_average", "args": ([5], 1), "expect": [5.0]},
    {"name": "whole", "call": "moving_average", "args": ([1, 2, 3], 3), "expect": [2.0]},
    {"name": "rounding", "call": "moving_average", "args": ([0.1, 0.2, 0.3], 2), "expect": [0.15, 0.25], "approx": True},
    {"name": "zero_window", "call": "moving_average", "args": ([1, 2], 0), "raises": "ValueError"},
    {"name": "window_too_big", "call": "moving_average", "args": ([1, 2, 3], 4), "raises": "ValueError"},
]
