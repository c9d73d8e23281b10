def word_count(text):
    counts = {}
    for piece in text.split():
        word = piece.strip(".,!?;:\"'").lower()
        if word:
            counts[word] = counts.get(word, 0) + 1
    return counts
