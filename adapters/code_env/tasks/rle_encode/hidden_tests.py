"""Hidden tests of 'rle_encode': data only. Read with ast.literal_eval, never imported or executed,
never copied where the agent or the sandbox can read it."""

CASES = [
    {"name": "simple", "call": "rle_encode", "args": ("aaab",), "expect": "a3b1"},
    {"name": "single", "call": "rle_encode", "args": ("x",), "expect": "x1"},
    {"name": "long_run", "call": "rle_encode", "args": ("zzzzzzzzzzzz",), "expect": "z12"},
    {"name": "case_matters", "call": "rle_encode", "args": ("aAa",), "expect": "a1A1a1"},
    {"name": "alternating", "call": "rle_encode", "args": ("abab",), "expect": "a1b1a1b1"},
    {"name": "empty_then_one", "steps": [
        {"call": "rle_encode", "args": ("",), "expect": ""},
        {"call": "rle_encode", "args": ("q",), "expect": "q1"},
    ]},
    {"name": "mixed_runs", "call": "rle_encode", "args": ("wwwwbbbw",), "expect": "w4b3w1"},
]
