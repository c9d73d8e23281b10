"""Hidden tests of 'median': data only. Read with ast.literal_eval, never imported or executed,
never copied where the agent or the sandbox can read it."""

CASES = [
    {"name": "odd", "call": "median", "args": ([3, 1, 2],), "expect": 2},
    {"name": "even", "call": "median", "args": ([1, 2, 3, 4],), "expect": 2.5},
    {"name": "single", "call": "median", "args": ([7],), "expect": 7},
    {"name": "odd_floats", "call": "median", "args": ([2.5, 1.5, 9.0],), "expect": 2.5},
    {"name": "even_is_float", "call": "median", "args": ([4, 2],), "expect": 3.0},
    {"name": "negatives", "call": "median", "args": ([-5, -1, -3],), "expect": -3},
    {"name": "unsorted_even", "call": "median", "args": ([10, 1, 7, 3],), "expect": 5.0},
    {"name": "empty", "call": "median", "args": ([],), "raises": "ValueError"},
]
