"""Hidden tests of 'balanced_brackets': data only. Read with ast.literal_eval, never imported or executed,
never copied where the agent or the sandbox can read it."""

CASES = [
    {"name": "simple", "steps": [
        {"call": "is_balanced", "args": ("()",), "expect": True},
        {"call": "is_balanced", "args": (")(",), "expect": False},
    ]},
    {"name": "nested", "steps": [
        {"call": "is_balanced", "args": ("([{}])",), "expect": True},
        {"call": "is_balanced", "args": ("([)]",), "expect": False},
    ]},
    {"name": "other_characters", "steps": [
        {"call": "is_balanced", "args": ("a(b)c[d]",), "expect": True},
        {"call": "is_balanced", "args": ("a(b",), "expect": False},
    ]},
    {"name": "empty_and_open", "steps": [
        {"call": "is_balanced", "args": ("",), "expect": True},
        {"call": "is_balanced", "args": ("{",), "expect": False},
    ]},
    {"name": "close_only", "steps": [
        {"call": "is_balanced", "args": ("x]",), "expect": False},
        {"call": "is_balanced", "args": ("[x]",), "expect": True},
    ]},
    {"name": "deep", "steps": [
        {"call": "is_balanced", "args": ("(((())))",), "expect": True},
        {"call": "is_balanced", "args": ("(((()))",), "expect": False},
    ]},
]
