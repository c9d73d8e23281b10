"""Hidden tests of 'fizzbuzz': data only. Read with ast.literal_eval, never imported or executed,
never copied where the agent or the sandbox can read it."""

CASES = [
    {"name": "five", "call": "fizzbuzz", "args": (5,), "expect": ["1", "2", "Fizz", "4", "Buzz"]},
    {"name": "fifteen", "call": "fizzbuzz", "args": (15,), "expect": ["1", "2", "Fizz", "4", "Buzz", "Fizz", "7", "8", "Fizz", "Buzz", "11", "Fizz", "13", "14", "FizzBuzz"]},
    {"name": "zero", "call": "fizzbuzz", "args": (0,), "expect": []},
    {"name": "negative", "call": "fizzbuzz", "args": (-1,), "raises": "ValueError"},
]
