"""Hidden tests of 'merge_intervals': data only. Read with ast.literal_eval, never imported or executed,
never copied where the agent or the sandbox can read it."""

CASES = [
    {"name": "overlap", "call": "merge_intervals", "args": ([[1, 3], [2, 6], [8, 10]],), "expect": [[1, 6], [8, 10]]},
    {"name": "touching", "call": "merge_intervals", "args": ([[1, 2], [2, 3]],), "expect": [[1, 3]]},
    {"name": "unsorted", "call": "merge_intervals", "args": ([[8, 10], [1, 3], [2, 6]],), "expect": [[1, 6], [8, 10]]},
    {"name": "contained", "call": "merge_intervals", "args": ([[1, 10], [2, 3], [4, 5]],), "expect": [[1, 10]]},
    {"name": "disjoint_unsorted", "call": "merge_intervals", "args": ([[5, 6], [1, 2]],), "expect": [[1, 2], [5, 6]]},
    {"name": "empty_then_two", "steps": [
        {"call": "merge_intervals", "args": ([],), "expect": []},
        {"call": "merge_intervals", "args": ([[3, 5], [1, 4]],), "expect": [[1, 5]]},
    ]},
    {"name": "negative", "call": "merge_intervals", "args": ([[-3, -1], [-2, 2]],), "expect": [[-3, 2]]},
]
