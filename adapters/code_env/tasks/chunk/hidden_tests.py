"""Hidden tests of 'chunk': data only. Read with ast.literal_eval, never imported or executed,
never copied where the agent or the sandbox can read it."""

CASES = [
    {"name": "even", "call": "chunk", "args": ([1, 2, 3, 4], 2), "expect": [[1, 2], [3, 4]]},
    {"name": "ragged", "call": "chunk", "args": ([1, 2, 3, 4, 5], 2), "expect": [[1, 2], [3, 4], [5]]},
    {"name": "size_larger_than_list", "call": "chunk", "args": ([1, 2], 5), "expect": [[1, 2]]},
    {"name": "size_one", "call": "chunk", "args": (["a", "b"], 1), "expect": [["a"], ["b"]]},
    {"name": "empty_then_one", "steps": [
        {"call": "chunk", "args": ([], 3), "expect": []},
        {"call": "chunk", "args": ([9], 1), "expect": [[9]]},
    ]},
    {"name": "zero_size", "call": "chunk", "args": ([1], 0), "raises": "ValueError"},
    {"name": "negative_size", "call": "chunk", "args": ([1, 2], -1), "raises": "ValueError"},
]
