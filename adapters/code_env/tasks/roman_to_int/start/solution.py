def roman_to_int(s):
    raise NotImplementedError
