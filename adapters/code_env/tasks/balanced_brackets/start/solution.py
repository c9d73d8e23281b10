def is_balanced(s):
    raise NotImplementedError
