def moving_average(xs, k):
    if k < 1 or k > len(xs):
        raise ValueError("window size out of range")
    return [sum(xs[i : i + k]) / k for i in range(len(xs) - k + 1)]
