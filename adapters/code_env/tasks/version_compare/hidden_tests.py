"""Hidden tests of 'version_compare': data only. Read with ast.literal_eval, never imported or executed,
never copied where the agent or the sandbox can read it."""

CASES = [
    {"name": "two_digit_minor", "call": "compare_versions", "args": ("1.10", "1.9"), "expect": 1},
    {"name": "missing_parts", "call": "compare_versions", "args": ("1.2", "1.2.0"), "expect": 0},
    {"name": "patch", "call": "compare_versions", "args": ("1.0.1", "1.0.10"), "expect": -1},
    {"name": "major", "call": "compare_versions", "args": ("2", "10"), "expect": -1},
    {"name": "equal", "call": "compare_versions", "args": ("3.1", "3.1"), "expect": 0},
    {"name": "greater", "call": "compare_versions", "args": ("2.0", "1.9"), "expect": 1},
]
