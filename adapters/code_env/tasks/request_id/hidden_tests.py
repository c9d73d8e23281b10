"""Hidden tests of 'request_id': data only. Read with ast.literal_eval, never imported or executed,
never copied where the agent or the sandbox can read it."""

CASES = [
    {"name": "format", "call": "request_id", "args": ("req",), "at": 1736154000.5, "seed": 1, "expect": 'req-1736154000500-2265'},
    {"name": "another_time", "call": "request_id", "args": ("job",), "at": 1700000000.0, "seed": 42, "expect": 'job-1700000000000-a3b1'},
    {"name": "milliseconds_floor", "call": "request_id", "args": ("t",), "at": 1700000000.9999, "seed": 7, "expect": 't-1700000000999-52e6'},
    {"name": "each_call_draws", "steps": [
        {"call": "request_id", "args": ("x",), "at": 1750000000.25, "seed": 3, "expect": 'x-1750000000250-3ceb'},
        {"call": "request_id", "args": ("x",), "expect": 'x-1750000000250-97b7'},
    ]},
    {"name": "empty_prefix", "call": "request_id", "args": ("",), "raises": "ValueError"},
    {"name": "dash_in_prefix", "call": "request_id", "args": ("a-b",), "raises": "ValueError"},
]
