SMALL_WORDS = {"a", "an", "the", "of", "and", "in", "on"}
