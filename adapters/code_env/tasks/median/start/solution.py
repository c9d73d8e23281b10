def median(xs):
    raise NotImplementedError
