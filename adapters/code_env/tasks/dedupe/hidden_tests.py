"""Hidden tests of 'dedupe': data only. Read with ast.literal_eval, never imported or executed,
never copied where the agent or the sandbox can read it."""

CASES = [
    {"name": "first_occurrence", "call": "dedupe", "args": ([1, 2, 1, 3],), "expect": [1, 2, 3]},
    {"name": "strings", "call": "dedupe", "args": (["b", "a", "b"],), "expect": ["b", "a"]},
    {"name": "empty", "call": "dedupe", "args": ([],), "expect": []},
    {"name": "all_same", "call": "dedupe", "args": ([3, 3, 3],), "expect": [3]},
    {"name": "interleaved", "call": "dedupe", "args": (["x", "y", "x", "z", "y"],), "expect": ["x", "y", "z"]},
]
