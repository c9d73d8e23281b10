"""Hidden tests of 'lru_cache': data only. Read with ast.literal_eval, never imported or executed,
never copied where the agent or the sandbox can read it."""

CASES = [
    {"name": "get_after_put", "steps": [
        {"call": "LRUCache", "args": (2,), "as": "cache"},
        {"call": "cache.put", "args": (1, "a"), "expect": None},
        {"call": "cache.get", "args": (1,), "expect": "a"},
        {"call": "cache.get", "args": (2,), "expect": -1},
    ]},
    {"name": "evicts_least_recent", "steps": [
        {"call": "LRUCache", "args": (2,), "as": "cache"},
        {"call": "cache.put", "args": (1, 1)},
        {"call": "cache.put", "args": (2, 2)},
        {"call": "cache.put", "args": (3, 3)},
        {"call": "cache.get", "args": (1,), "expect": -1},
        {"call": "cache.get", "args": (3,), "expect": 3},
    ]},
    {"name": "get_refreshes", "steps": [
        {"call": "LRUCache", "args": (2,), "as": "cache"},
        {"call": "cache.put", "args": (1, 1)},
        {"call": "cache.put", "args": (2, 2)},
        {"call": "cache.get", "args": (1,), "expect": 1},
        {"call": "cache.put", "args": (3, 3)},
        {"call": "cache.get", "args": (2,), "expect": -1},
        {"call": "cache.get", "args": (1,), "expect": 1},
    ]},
    {"name": "put_replaces", "steps": [
        {"call": "LRUCache", "args": (2,), "as": "cache"},
        {"call": "cache.put", "args": (1, 1)},
        {"call": "cache.put", "args": (1, 10)},
        {"call": "cache.get", "args": (1,), "expect": 10},
        {"call": "cache.__len__", "expect": 1},
    ]},
    {"name": "capacity_one", "steps": [
        {"call": "LRUCache", "args": (1,), "as": "cache"},
        {"call": "cache.put", "args": ("a", 1)},
        {"call": "cache.put", "args": ("b", 2)},
        {"call": "cache.get", "args": ("a",), "expect": -1},
        {"call": "cache.get", "args": ("b",), "expect": 2},
    ]},
    {"name": "length_is_bounded", "steps": [
        {"call": "LRUCache", "args": (3,), "as": "cache"},
        {"call": "cache.put", "args": (1, 1)},
        {"call": "cache.put", "args": (2, 2)},
        {"call": "cache.put", "args": (3, 3)},
        {"call": "cache.put", "args": (4, 4)},
        {"call": "cache.__len__", "expect": 3},
    ]},
    {"name": "bad_capacity", "call": "LRUCache", "args": (0,), "raises": "ValueError"},
]
