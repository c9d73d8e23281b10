def median(xs):
    if not xs:
        raise ValueError("median of an empty list")
    values = sorted(xs)
    middle = len(values) // 2
    if len(values) % 2:
        return values[middle]
    return (values[middle - 1] + values[middle]) / 2
