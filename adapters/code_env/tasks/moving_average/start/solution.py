def moving_average(xs, k):
    if k < 1 or k > len(xs):
        raise ValueError("window size out of range")
    out = []
    for i in range(len(xs) - k):
        out.append(sum(xs[i : i + k]) / k)
    return out
