def dedupe(items):
    seen = {}
    for index, item in enumerate(items):
        seen[item] = index
    return [item for item, _ in sorted(seen.items(), key=lambda pair: pair[1])]
