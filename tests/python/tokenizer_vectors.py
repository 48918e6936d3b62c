"""The tokenizer test vectors of ../shared/data/tokenizers/vectors: NAME.inp holds the texts (separated by
__ggml_vocab_test__ lines), NAME.out the ids of each text, one line per text."""
import os


def read_vectors(tokenizers_dir, name):
    """[(text, ids)] of every vector of NAME."""
    inp = open(os.path.join(tokenizers_dir, "vectors", name + ".inp"), encoding="utf-8", newline="").read()
    texts = inp.split("\n__ggml_vocab_test__\n")
    if texts[-1] == "":
        texts.pop()
    ids = [[int(x) for x in line.split()] for line in
           open(os.path.join(tokenizers_dir, "vectors", name + ".out"), encoding="utf-8").read().split("\n")[:-1]]
    assert len(texts) == len(ids)
    return list(zip(texts, ids))
