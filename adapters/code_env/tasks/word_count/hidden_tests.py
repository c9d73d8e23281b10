"""Hidden tests of 'word_count': data only. Read with ast.literal_eval, never imported or executed,
never copied where the agent or the sandbox can read it."""

CASES = [
    {"name": "simple", "call": "word_count", "args": ("a b a",), "expect": {"a": 2, "b": 1}},
    {"name": "punctuation", "call": "word_count", "args": ("Hello, world! Hello.",), "expect": {"hello": 2, "world": 1}},
    {"name": "case", "call": "word_count", "args": ("The the THE",), "expect": {"the": 3}},
    {"name": "quotes", "call": "word_count", "args": ("'quoted' \"word\"",), "expect": {"quoted": 1, "word": 1}},
    {"name": "empty_then_one", "steps": [
        {"call": "word_count", "args": ("",), "expect": {}},
        {"call": "word_count", "args": ("x",), "expect": {"x": 1}},
    ]},
    {"name": "whitespace", "call": "word_count", "args": ("  tabs\tand\nnewlines  ",), "expect": {"tabs": 1, "and": 1, "newlines": 1}},
    {"name": "only_punctuation", "call": "word_count", "args": ("... !!! x",), "expect": {"x": 1}},
    {"name": "inner_apostrophe", "call": "word_count", "args": ("don't stop",), "expect": {"don't": 1, "stop": 1}},
]
