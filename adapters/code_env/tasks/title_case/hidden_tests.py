"""Hidden tests of 'title_case': data only. Read with ast.literal_eval, never imported or executed,
never copied where the agent or the sandbox can read it."""

CASES = [
    {"name": "lowercase_input", "call": "title_case", "args": ("the lord of the rings",), "expect": "The Lord of the Rings"},
    {"name": "uppercase_small_words", "call": "title_case", "args": ("WAR AND PEACE",), "expect": "War and Peace"},
    {"name": "first_word_small", "call": "title_case", "args": ("a tale",), "expect": "A Tale"},
    {"name": "mixed_case", "call": "title_case", "args": ("hELLO wORLD",), "expect": "Hello World"},
    {"name": "small_word_mixed_case", "call": "title_case", "args": ("alice In wonderland",), "expect": "Alice in Wonderland"},
]
