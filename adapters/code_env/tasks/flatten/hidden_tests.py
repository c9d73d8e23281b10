"""Hidden tests of 'flatten': data only. Read with ast.literal_eval, never imported or executed,
never copied where the agent or the sandbox can read it."""

CASES = [
    {"name": "one_level", "call": "flatten", "args": ([1, [2, 3], 4],), "expect": [1, 2, 3, 4]},
    {"name": "deep", "call": "flatten", "args": ([[[[1]]], 2],), "expect": [1, 2]},
    {"name": "empties", "call": "flatten", "args": ([[], [[]], 3],), "expect": [3]},
    {"name": "empty_then_nested", "steps": [
        {"call": "flatten", "args": ([],), "expect": []},
        {"call": "flatten", "args": ([[5]],), "expect": [5]},
    ]},
    {"name": "order", "call": "flatten", "args": ([[1, [2, [3, [4]]]], 5],), "expect": [1, 2, 3, 4, 5]},
    {"name": "flat_then_nested", "steps": [
        {"call": "flatten", "args": ([1, 2],), "expect": [1, 2]},
        {"call": "flatten", "args": ([[1], [2]],), "expect": [1, 2]},
    ]},
]
