from words import SMALL_WORDS


def title_case(text):
    out = []
    for i, word in enumerate(text.split(" ")):
        if i > 0 and word in SMALL_WORDS:
            out.append(word)
        else:
            out.append(word[:1].upper() + word[1:].lower())
    return " ".join(out)
