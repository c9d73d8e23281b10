def rle_encode(s):
    raise NotImplementedError
