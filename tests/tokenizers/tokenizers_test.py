import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bahdanau import tokenizers as kt
from keras_bahdanau.reserved import BOS_ID
from keras_bahdanau.reserved import EOS_ID
from keras_bahdanau.reserved import PAD_ID
from keras_bahdanau.reserved import RESERVED_TOKENS
from keras_bahdanau.reserved import UNK_ID

# Sentences whose punctuation and spacing survive tokenize -> detokenize.
SENTENCES = [
    "Der Apfel ist rot.",
    "Er sagte: „Ich komme morgen.“",
    "He said: “I'll come tomorrow.”",
    'She said "yes" and left.',
    "The word 'côte' has an accent.",
    "The students' books (all of them) are new!",
    "Feuerwehr- und Rettungsfahrzeuge kamen z.B. um 3,5 Uhr.",
    "Is it 10% or 20%?",
    "Wir haben E-Mail-Adressen und -Konten, oder?",
    "¿Qué tal? ¡Bien!",
    "Warte…",
]
KINDS = ["word", "wordpiece", "unigram", "bpe"]
WORD_KINDS = ["word", "wordpiece"]  # split into words first
SENTENCEPIECE_KINDS = ["unigram", "bpe"]
# SentencePiece learns exactly the size asked for, at most what the text
# holds; the word-based learners stop where the text does.
SIZES = {"word": 400, "wordpiece": 400, "unigram": 80, "bpe": 80}


@pytest.fixture(scope="module")
def tokenizers():
    # Repeated so that WordPiece's learner (minimum count 10) keeps pieces.
    return {
        kind: kt.build_tokenizer(kind, SENTENCES * 10, SIZES[kind])
        for kind in KINDS
    }


@pytest.mark.parametrize("kind", WORD_KINDS)
def test_reserved_ids_and_unknown_words(tokenizers, kind):
    tokenizer = tokenizers[kind]
    assert tokenizer.get_vocabulary()[:4] == list(RESERVED_TOKENS)
    assert [tokenizer.token_to_id(t) for t in RESERVED_TOKENS] == [0, 1, 2, 3]
    # Reserved tokens cannot come out of text: "[" and "]" are split off.
    ids = tokenizer.tokenize("[PAD] [BOS] [EOS] Ωmega").numpy()
    assert not set(ids) & {PAD_ID, BOS_ID, EOS_ID}
    assert ids[-1] == UNK_ID  # "Ω" was never seen.
    assert tokenizer.token_to_id("never-seen") == UNK_ID


def test_word_shortlist_keeps_the_most_frequent_words():
    tokenizer = kt.WordTokenizer.from_texts(
        ["a a a b b c", "b a d"], max_vocabulary_size=6
    )
    assert tokenizer.vocabulary_size == 6
    assert tokenizer.get_vocabulary()[4:] == ["a", "b"]
    assert tokenizer.tokenize("a b c").numpy().tolist() == [4, 5, UNK_ID]
    # tokens() keeps the word that tokenize() maps to [UNK]: what
    # unknown-word replacement copies.
    assert tokenizer.tokens("a b c").numpy().tolist() == [b"a", b"b", b"c"]


@pytest.mark.parametrize("kind", KINDS)
def test_round_trip(tokenizers, kind):
    tokenizer = tokenizers[kind]
    ids = tokenizer.tokenize(SENTENCES)
    assert isinstance(ids, tf.RaggedTensor) and ids.dtype == tf.int32
    assert UNK_ID not in ids.flat_values.numpy()
    assert tokenizer.detokenize(ids).numpy().tolist() == [
        s.encode() for s in SENTENCES
    ]
    tokens = tokenizer.tokens(SENTENCES)
    assert tokens.row_lengths().numpy().tolist() == (
        ids.row_lengths().numpy().tolist()
    )


def test_word_normalisation():
    tokenizer = kt.WordTokenizer.from_texts(SENTENCES, 1000)
    words = tokenizer.tokens("  Der\tApfel\u00a0ist  rot . ").numpy().tolist()
    assert words == [b"Der", b"Apfel", b"ist", b"rot", b"."]
    text = tokenizer.detokenize(tokenizer.tokenize("Der  Apfel ist rot .  "))
    assert text.numpy() == b"Der Apfel ist rot."
    lowercase = kt.WordTokenizer.from_texts(SENTENCES, 1000, True)
    assert lowercase.tokens("ÄPFEL, BITTE!").numpy().tolist() == [
        "äpfel".encode(),
        b",",
        b"bitte",
        b"!",
    ]


@pytest.mark.parametrize("kind", WORD_KINDS)
def test_detokenize_stops_at_eos_and_drops_pad_and_bos(tokenizers, kind):
    tokenizer = tokenizers[kind]
    apple, red, dot = tokenizer.tokenize("Apfel rot.").numpy().tolist()
    expected = [b"Apfel rot.", b"rot"]
    rows = [[BOS_ID, apple, red, dot, EOS_ID, apple], [red, EOS_ID]]
    assert tokenizer.detokenize(rows).numpy().tolist() == expected
    dense = np.array([[apple, red, dot, EOS_ID], [BOS_ID, red, PAD_ID, PAD_ID]])
    assert tokenizer.detokenize(dense).numpy().tolist() == expected
    backend_tensor = keras.ops.convert_to_tensor(dense)
    assert tokenizer.detokenize(backend_tensor).numpy().tolist() == expected
    assert tokenizer.detokenize(dense[0]).numpy() == b"Apfel rot."
    assert tokenizer.detokenize([UNK_ID, dot]).numpy() == b"[UNK]."
    with pytest.raises(tf.errors.InvalidArgumentError, match="vocabulary_size"):
        tokenizer.detokenize([tokenizer.vocabulary_size])


@pytest.mark.parametrize("kind", KINDS)
def test_eager_and_tf_data_give_the_same_ids(tokenizers, kind):
    tokenizer = tokenizers[kind]
    texts = SENTENCES + ["Ein ganz neuer Satz, unbekannt."]
    eager = tokenizer.tokenize(texts).to_list()
    dataset = tf.data.Dataset.from_tensor_slices(texts).map(tokenizer.tokenize)
    assert [row.numpy().tolist() for row in dataset] == eager
    batched = tf.data.Dataset.from_tensor_slices(texts).batch(5)
    batched = batched.map(tokenizer.tokenize).unbatch()
    assert [row.numpy().tolist() for row in batched] == eager


@pytest.mark.parametrize("kind", KINDS)
def test_save_and_load(tokenizers, kind, tmp_path):
    tokenizer = tokenizers[kind]
    tokenizer.save(tmp_path / kind)
    lines = (tmp_path / kind / "vocabulary.txt").read_text("utf-8")
    assert lines.split("\n")[:-1] == tokenizer.get_vocabulary()
    loaded = kt.load_tokenizer(tmp_path / kind)
    assert type(loaded) is type(tokenizer)
    assert loaded.get_vocabulary() == tokenizer.get_vocabulary()
    assert loaded.tokenize(SENTENCES).to_list() == (
        tokenizer.tokenize(SENTENCES).to_list()
    )
    other = {
        "word": kt.WordPieceTokenizer,
        "wordpiece": kt.WordTokenizer,
        "unigram": kt.WordTokenizer,
        "bpe": kt.WordPieceTokenizer,
    }[kind]
    with pytest.raises(ValueError, match="not a"):
        other.load(tmp_path / kind)
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        kt.load_tokenizer(tmp_path)


@pytest.mark.parametrize("kind", KINDS)
def test_saved_model_runs_the_same_ops(tokenizers, kind, tmp_path):
    tokenizer = tokenizers[kind]
    module = tf.Module()
    module.tokenizer = tokenizer  # Tracks the lookup table.
    module.tokenize = tf.function(
        lambda text: tokenizer.tokenize(text).to_tensor(),
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    module.detokenize = tf.function(
        tokenizer.detokenize,
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
    )
    tf.saved_model.save(module, str(tmp_path))
    del module
    loaded = tf.saved_model.load(str(tmp_path))
    ids = loaded.tokenize(tf.constant(SENTENCES))
    expected = tokenizer.tokenize(SENTENCES).to_tensor()
    np.testing.assert_array_equal(ids.numpy(), expected.numpy())
    text = loaded.detokenize(ids).numpy().tolist()
    assert text == [s.encode() for s in SENTENCES]


def test_invalid_arguments(tmp_path):
    with pytest.raises(ValueError, match="must start with"):
        kt.WordTokenizer(["[UNK]", "[PAD]", "[BOS]", "[EOS]", "a"])
    with pytest.raises(ValueError, match="Received duplicates: \\['a'\\]"):
        kt.WordTokenizer(list(RESERVED_TOKENS) + ["a", "b", "a"])
    with pytest.raises(ValueError, match="no whitespace"):
        kt.WordTokenizer(list(RESERVED_TOKENS) + ["a b"])
    with pytest.raises(ValueError, match="Received: kind='char'"):
        kt.build_tokenizer("char", SENTENCES, 100)
    with pytest.raises(ValueError, match="max_vocabulary_size=4"):
        kt.build_tokenizer("word", SENTENCES, 4)
    with pytest.raises(ValueError, match="empty"):
        kt.build_tokenizer("word", [], 100)
    with pytest.raises(ValueError, match="shape=\\(1, 1\\)"):
        kt.WordTokenizer.from_texts(SENTENCES, 100).tokenize([["a"]])


@pytest.mark.parametrize("kind", SENTENCEPIECE_KINDS)
def test_sentencepiece_sizes_and_reserved_ids(tokenizers, kind):
    tokenizer = tokenizers[kind]
    assert isinstance(tokenizer, kt.SentencePieceTokenizer)
    # Exactly the size asked for, the reserved tokens at ids 0-3.
    assert tokenizer.vocabulary_size == SIZES[kind]
    assert tokenizer.get_vocabulary()[:4] == list(RESERVED_TOKENS)
    # Control tokens never come out of text, even spelled out.
    ids = tokenizer.tokenize("[PAD] [BOS] [EOS] Apfel").numpy()
    assert not set(ids) & {PAD_ID, BOS_ID, EOS_ID}
    # An unseen character becomes [UNK]; its neighbours stay pieces.
    ids = tokenizer.tokenize("Ωrot").numpy().tolist()
    assert UNK_ID in ids and len(ids) > 1
    assert tokenizer.detokenize(ids).numpy() == b"[UNK]rot"
    with pytest.raises(ValueError, match="max_vocabulary_size=5000"):
        kt.build_tokenizer(kind, SENTENCES, 5000)


@pytest.mark.parametrize("kind", SENTENCEPIECE_KINDS)
def test_sentencepiece_normalises_spaces_only(tokenizers, kind):
    tokenizer = tokenizers[kind]
    text = tokenizer.detokenize(
        tokenizer.tokenize("  Der\tApfel\u00a0ist rot. ")
    )
    assert text.numpy() == b"Der Apfel ist rot."
    # No NFKC: "…" and "„“" come back as they were.
    assert tokenizer.detokenize(tokenizer.tokenize("Warte…")).numpy() == (
        "Warte…".encode()
    )
    tokens = tokenizer.tokens("Der Apfel").numpy().tolist()
    assert b"".join(tokens).decode().replace("\u2581", " ").strip() == (
        "Der Apfel"
    )
    ids = tokenizer.tokenize(["", "  "]).to_list()
    assert ids == [[], []]
    assert tokenizer.detokenize([EOS_ID]).numpy() == b""
    lowercase = kt.build_tokenizer(
        kind, SENTENCES * 10, SIZES[kind], lowercase=True
    )
    assert lowercase.tokenize("DER APFEL").numpy().tolist() == (
        lowercase.tokenize("der apfel").numpy().tolist()
    )


def test_sentencepiece_learns_the_same_model_twice():
    first = kt.build_tokenizer("unigram", SENTENCES * 10, 80)
    second = kt.build_tokenizer("unigram", SENTENCES * 10, 80)
    assert first.get_vocabulary() == second.get_vocabulary()


@pytest.mark.parametrize("kind", SENTENCEPIECE_KINDS)
def test_sentencepiece_writes_no_log(kind, tmp_path, capfd):
    # SentencePiece's C++ log bypasses sys.stderr: capfd reads the process's
    # file descriptors 1 and 2.
    tokenizer = kt.build_tokenizer(kind, SENTENCES * 10, SIZES[kind])
    tokenizer.tokenize(SENTENCES)
    tokenizer.save(tmp_path)
    loaded = kt.load_tokenizer(tmp_path)
    loaded.detokenize(loaded.tokenize(SENTENCES))
    list(tf.data.Dataset.from_tensors(SENTENCES).map(loaded.tokenize))
    out, err = capfd.readouterr()
    assert "LOG(" not in out + err, out + err


def test_the_tokenizer_modules_import_no_circle():
    """`tokenizer.py` knows its subclasses by registry, not by import."""
    import ast
    import pathlib

    folder = pathlib.Path(kt.__file__).parent
    graph = {}
    for path in folder.glob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        graph[path.stem] = {
            name.rsplit(".", 1)[1]
            for name in names
            if name.startswith("keras_bahdanau.tokenizers.")
        }
    assert graph["tokenizer"] == {"words"}

    def reaches(start, goal, seen=()):
        return any(
            module == goal
            or (module not in seen and reaches(module, goal, (*seen, module)))
            for module in graph.get(start, ())
        )

    circles = [module for module in graph if reaches(module, module)]
    assert circles == []
