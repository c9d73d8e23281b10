"""Hidden tests of 'primes_up_to': data only. Read with ast.literal_eval, never imported or executed,
never copied where the agent or the sandbox can read it."""

CASES = [
    {"name": "ten", "call": "primes_up_to", "args": (10,), "expect": [2, 3, 5, 7]},
    {"name": "prime_bound", "call": "primes_up_to", "args": (13,), "expect": [2, 3, 5, 7, 11, 13]},
    {"name": "two", "call": "primes_up_to", "args": (2,), "expect": [2]},
    {"name": "one", "call": "primes_up_to", "args": (1,), "expect": []},
    {"name": "thirty", "call": "primes_up_to", "args": (30,), "expect": [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]},
]
