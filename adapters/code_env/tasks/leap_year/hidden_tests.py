"""Hidden tests of 'leap_year': data only. Read with ast.literal_eval, never imported or executed,
never copied where the agent or the sandbox can read it."""

CASES = [
    {"name": "ordinary_leap", "call": "is_leap", "args": (2024,), "expect": True},
    {"name": "ordinary", "call": "is_leap", "args": (2023,), "expect": False},
    {"name": "century", "call": "is_leap", "args": (1900,), "expect": False},
    {"name": "fourth_century", "call": "is_leap", "args": (2000,), "expect": True},
    {"name": "far_future", "call": "is_leap", "args": (2400,), "expect": True},
    {"name": "next_century", "call": "is_leap", "args": (2100,), "expect": False},
]
