"""Hidden tests of 'parse_csv_line': data only. Read with ast.literal_eval, never imported or executed,
never copied where the agent or the sandbox can read it."""

CASES = [
    {"name": "plain", "call": "parse_csv_line", "args": ("a,b,c",), "expect": ["a", "b", "c"]},
    {"name": "quoted_comma", "call": "parse_csv_line", "args": ('"a,b",c',), "expect": ["a,b", "c"]},
    {"name": "doubled_quotes", "call": "parse_csv_line", "args": ('"say ""hi""",x',), "expect": ['say "hi"', "x"]},
    {"name": "empty_line", "call": "parse_csv_line", "args": ("",), "expect": [""]},
    {"name": "empty_field", "call": "parse_csv_line", "args": ("a,,b",), "expect": ["a", "", "b"]},
    {"name": "spaces_kept", "call": "parse_csv_line", "args": (" a , b",), "expect": [" a ", " b"]},
]
