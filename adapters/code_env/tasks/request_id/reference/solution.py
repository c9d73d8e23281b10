import random
import time


def request_id(prefix):
    if not prefix or "-" in prefix:
        raise ValueError(f"bad prefix: {prefix!r}")
    return f"{prefix}-{int(time.time() * 1000)}-{random.getrandbits(16):04x}"
