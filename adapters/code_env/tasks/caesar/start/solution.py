def caesar(text, shift):
    raise NotImplementedError
