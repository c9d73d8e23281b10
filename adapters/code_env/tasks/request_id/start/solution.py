def request_id(prefix):
    raise NotImplementedError
