"""Hidden tests of 'roman_to_int': data only. Read with ast.literal_eval, never imported or executed,
never copied where the agent or the sandbox can read it."""

CASES = [
    {"name": "three", "call": "roman_to_int", "args": ("III",), "expect": 3},
    {"name": "four", "call": "roman_to_int", "args": ("IV",), "expect": 4},
    {"name": "nine", "call": "roman_to_int", "args": ("IX",), "expect": 9},
    {"name": "fifty_eight", "call": "roman_to_int", "args": ("LVIII",), "expect": 58},
    {"name": "year", "call": "roman_to_int", "args": ("MCMXCIV",), "expect": 1994},
    {"name": "largest", "call": "roman_to_int", "args": ("MMMCMXCIX",), "expect": 3999},
    {"name": "forty", "call": "roman_to_int", "args": ("XL",), "expect": 40},
    {"name": "empty", "call": "roman_to_int", "args": ("",), "raises": "ValueError"},
    {"name": "unknown_letter", "call": "roman_to_int", "args": ("XIZ",), "raises": "ValueError"},
    {"name": "lowercase", "call": "roman_to_int", "args": ("iv",), "raises": "ValueError"},
]
