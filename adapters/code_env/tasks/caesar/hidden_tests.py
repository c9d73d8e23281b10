"""Hidden tests of 'caesar': data only. Read with ast.literal_eval, never imported or executed,
never copied where the agent or the sandbox can read it."""

CASES = [
    {"name": "one", "call": "caesar", "args": ("abc", 1), "expect": "bcd"},
    {"name": "wraps", "call": "caesar", "args": ("xyz", 3), "expect": "abc"},
    {"name": "rot13_keeps_case_and_punctuation", "call": "caesar", "args": ("Hello, World!", 13), "expect": "Uryyb, Jbeyq!"},
    {"name": "negative", "call": "caesar", "args": ("abc", -1), "expect": "zab"},
    {"name": "large_shift", "call": "caesar", "args": ("abc", 27), "expect": "bcd"},
    {"name": "non_ascii_unchanged", "call": "caesar", "args": ("\u00c4bC9", 1), "expect": "\u00c4cD9"},
    {"name": "full_turns", "steps": [
        {"call": "caesar", "args": ("Zz", 52), "expect": "Zz"},
        {"call": "caesar", "args": ("Zz", 1), "expect": "Aa"},
    ]},
]
