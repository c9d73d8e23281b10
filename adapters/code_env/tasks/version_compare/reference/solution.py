def compare_versions(a, b):
    pa, pb = [int(p) for p in a.split(".")], [int(p) for p in b.split(".")]
    width = max(len(pa), len(pb))
    pa += [0] * (width - len(pa))
    pb += [0] * (width - len(pb))
    for x, y in zip(pa, pb):
        if x != y:
            return -1 if x < y else 1
    return 0
