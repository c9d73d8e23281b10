"""Hidden tests of 'parse_duration': data only. Read with ast.literal_eval, never imported or executed,
never copied where the agent or the sandbox can read it."""

CASES = [
    {"name": "hours_minutes", "call": "parse_duration", "args": ("1h30m",), "expect": 5400},
    {"name": "seconds", "call": "parse_duration", "args": ("45s",), "expect": 45},
    {"name": "all_units", "call": "parse_duration", "args": ("1h2m3s",), "expect": 3723},
    {"name": "hours", "call": "parse_duration", "args": ("2h",), "expect": 7200},
    {"name": "many_digits", "call": "parse_duration", "args": ("100m",), "expect": 6000},
    {"name": "zero_then_ten", "steps": [
        {"call": "parse_duration", "args": ("0s",), "expect": 0},
        {"call": "parse_duration", "args": ("10s",), "expect": 10},
    ]},
    {"name": "empty", "call": "parse_duration", "args": ("",), "raises": "ValueError"},
    {"name": "unknown_unit", "call": "parse_duration", "args": ("5d",), "raises": "ValueError"},
    {"name": "unit_without_number", "call": "parse_duration", "args": ("h",), "raises": "ValueError"},
    {"name": "out_of_order", "call": "parse_duration", "args": ("30m1h",), "raises": "ValueError"},
    {"name": "repeated", "call": "parse_duration", "args": ("1h1h",), "raises": "ValueError"},
    {"name": "spaces", "call": "parse_duration", "args": ("1h 30m",), "raises": "ValueError"},
]
