"""Tokenizers: words with a frequency shortlist, or subwords.

Subwords are WordPiece or SentencePiece (unigram or BPE). Every tokenizer
is a `tf.Module` whose `tokenize()`, `tokens()` and `detokenize()` are
graph functions, so eager calls, `tf.data` and an exported SavedModel
(tracked with `keras.export.ExportArchive.track()`) run the same ops.

Word splitting (words and WordPiece; SentencePiece reads raw text):

* Whitespace runs become one space; text is optionally lowercased.
* Every punctuation or symbol character becomes a token of its own, except
  `-` touching a letter or digit (`E-Mail`, `Feuerwehr-`) and `' . , : /`
  between letters or digits (`don't`, `z.B`, `3,5`, `and/or`).
* `detokenize()` re-attaches punctuation: quote pairs (`„...“`, `"..."`,
  ...) close around their content; `. , ; : ! ? % ) ] } …` and a lone `'`
  attach to the word before, `( [ { ¿ ¡` to the word after. Round trips
  give back 99.9% of the sentences of `ding_de_en()`; the rest differ
  only in spacing (`6 %` becomes `6%`, `$60` becomes `$ 60`).

Every vocabulary starts with the reserved tokens `[PAD]`, `[UNK]`, `[BOS]`,
`[EOS]` at ids 0-3. They cannot come out of text: `[` and `]` are split off.
"""

import collections
import functools
import io
import json
import pathlib
import tempfile

import keras
import numpy as np
import tensorflow as tf

from keras_bahdanau.reserved import BOS
from keras_bahdanau.reserved import BOS_ID
from keras_bahdanau.reserved import EOS
from keras_bahdanau.reserved import EOS_ID
from keras_bahdanau.reserved import PAD
from keras_bahdanau.reserved import PAD_ID
from keras_bahdanau.reserved import RESERVED_TOKENS
from keras_bahdanau.reserved import UNK
from keras_bahdanau.reserved import UNK_ID

VOCABULARY_FILE = "vocabulary.txt"
CONFIG_FILE = "tokenizer.json"

# SentencePiece's own normalisation is left to normalise_text(), which turns
# every control character into a space. This one rule (tab -> space) says
# the same and never applies, as no tab is left. A model with no rule at all
# ("identity") makes the SentencePiece inside tf-text log "precompiled_charsmap
# is empty" each time it loads the model, straight to file descriptor 2 and
# past any log level: its logging can be neither set nor reached.
_SENTENCEPIECE_RULES = "9\t20\n"  # U+0009 -> U+0020, hex code points

# A private-use character marks the spaces that splitting inserts, so that
# they can be told apart from the spaces of the text.
_MARK = "\ue000"
_WORD_CHARACTER = r"[\pL\pN\pM]"
_INSIDE_WORD = f"({_WORD_CHARACTER}){_MARK}(['’.,:/]){_MARK}({_WORD_CHARACTER})"
# Punctuation and symbols are split off, then rejoined inside words.
_SPLIT_RULES = (
    (r"([^\pL\pN\pM\s])", _MARK + r"\1" + _MARK),
    # Matches cannot overlap, so "a-b-c" needs a second pass for "b-c".
    (_INSIDE_WORD, r"\1\2\3"),
    (_INSIDE_WORD, r"\1\2\3"),
    (f"({_WORD_CHARACTER}){_MARK}-{_MARK}", r"\1-"),
    (f"{_MARK}-{_MARK}({_WORD_CHARACTER})", r"-\1"),
    (_MARK, " "),
)
# Quote pairs go first: their characters open in one language and close in
# another („...“ versus “...”).
_QUOTE_PAIRS = ("„“", "“”", "‚‘", "‘’", "»«", "«»", '""')
_JOIN_RULES = (
    *((f"{a} (.*?) {b}", rf"{a}\1{b}") for a, b in _QUOTE_PAIRS),
    (r"(^| )' (.*?) '", r"\1'\2'"),
    # A lone apostrophe ends a word: "students' books", "würd' ich".
    (r" (['’])( |$)", r"\1\2"),
    (r" ([.,;:!?%)\]}…])", r"\1"),
    (r"([(\[{¿¡]) ", r"\1"),
)


def normalise_text(strings, lowercase=False):
    """Collapses whitespace runs to one space, strips, optionally lowercases.

    Args:
        strings: string tensor, any shape.
        lowercase: whether to lowercase (Unicode-aware).

    Returns:
        A string tensor of the same shape.
    """
    # Python's str.split() (used on vocabulary files) also splits on
    # Unicode spaces and control characters; RE2's \s is ASCII only.
    text = tf.strings.regex_replace(strings, r"[\s\p{Z}\p{Cc}]+", " ")
    text = tf.strings.strip(text)
    if lowercase:
        text = tf.strings.lower(text, encoding="utf-8")
    return text


def split_words(strings, lowercase=False):
    """Normalises text and splits it into words and punctuation.

    Args:
        strings: string tensor, scalar or 1-D.
        lowercase: whether to lowercase (Unicode-aware).

    Returns:
        A string tensor with one more dimension (ragged for 1-D input).
    """
    return tf.strings.split(
        _rewrite(normalise_text(strings, lowercase), _SPLIT_RULES)
    )


def join_words(text):
    """Re-attaches punctuation in space-separated words (see module doc).

    Args:
        text: string tensor of words joined by single spaces.

    Returns:
        A string tensor of the same shape.
    """
    return _rewrite(text, _JOIN_RULES)


def _rewrite(text, rules):
    for pattern, rewrite in rules:
        text = tf.strings.regex_replace(text, pattern, rewrite)
    return text


class Tokenizer(tf.Module):
    """Base class: a vocabulary with reserved ids and graph-mode methods.

    Subclasses implement `_tokenize_words(words)` and `_join_tokens(tokens)`.

    Args:
        vocabulary: list of token strings, or the path of a file with one
            token per line. It must start with `RESERVED_TOKENS`.
        lowercase: whether to lowercase text before tokenizing.
    """

    def __init__(self, vocabulary, lowercase=False):
        super().__init__()
        if isinstance(vocabulary, (str, pathlib.Path)):
            text = pathlib.Path(vocabulary).read_text(encoding="utf-8")
            # Not splitlines(): it would also split on U+2028 and friends.
            vocabulary = text.removesuffix("\n").split("\n")
        vocabulary = [str(token) for token in vocabulary]
        if tuple(vocabulary[: len(RESERVED_TOKENS)]) != RESERVED_TOKENS:
            raise ValueError(
                f"A vocabulary must start with {list(RESERVED_TOKENS)}. "
                f"Received: {vocabulary[: len(RESERVED_TOKENS)]}"
            )
        bad = [t for t in vocabulary if len(t.split()) != 1]
        if bad:
            raise ValueError(
                "Vocabulary tokens must be non-empty and contain no "
                f"whitespace. Received: {bad[:5]}"
            )
        duplicates = [
            t for t, n in collections.Counter(vocabulary).items() if n > 1
        ]
        if duplicates:
            raise ValueError(
                f"Vocabulary tokens must be unique. Received duplicates: "
                f"{duplicates[:5]}"
            )
        self._vocabulary = vocabulary
        self.lowercase = bool(lowercase)
        self._vocabulary_tensor = tf.constant(vocabulary)
        # One graph function per method, traced once: the eager path runs
        # exactly the ops that tf.data and a SavedModel run.
        of_strings = functools.partial(
            tf.function, input_signature=[tf.TensorSpec([None], "string")]
        )
        self._tokenize_fn = of_strings(self._tokenize_ops)
        self._tokens_fn = of_strings(self._tokens_ops)
        self._detokenize_fn = tf.function(
            self._detokenize_ops,
            input_signature=[tf.TensorSpec([None, None], "int32")],
        )

    @property
    def vocabulary_size(self):
        """Number of tokens, reserved tokens included."""
        return len(self._vocabulary)

    def get_vocabulary(self):
        """The tokens as a list of strings, in id order."""
        return list(self._vocabulary)

    def id_to_token(self, id):
        """The token string of an integer id."""
        if not 0 <= id < self.vocabulary_size:
            raise ValueError(
                f"`id` must be in [0, {self.vocabulary_size}). Received: "
                f"id={id}"
            )
        return self._vocabulary[id]

    def token_to_id(self, token):
        """The id of a token string; `UNK_ID` if it is not in the vocabulary."""
        if not hasattr(self, "_token_ids"):
            self._token_ids = {t: i for i, t in enumerate(self._vocabulary)}
        return self._token_ids.get(token, UNK_ID)

    def tokenize(self, strings):
        """Maps text to token ids.

        Args:
            strings: a string, a list of strings, or a string tensor (scalar
                or 1-D).

        Returns:
            int32 ids, without `[BOS]`/`[EOS]`: a `tf.Tensor` (tokens,) for
            a scalar, a `tf.RaggedTensor` (batch, None) for a batch.
        """
        return _map_batch(self._tokenize_fn, _as_strings(strings))

    def tokens(self, strings):
        """The token strings, one for each id that `tokenize()` returns.

        For words, the normalised words, also those that `tokenize()` maps
        to `[UNK]` (what unknown-word replacement copies); for subwords,
        the pieces.

        Args:
            strings: as for `tokenize()`.

        Returns:
            A string `tf.Tensor` or `tf.RaggedTensor`, shaped like the
            result of `tokenize()`.
        """
        return _map_batch(self._tokens_fn, _as_strings(strings))

    def detokenize(self, ids):
        """Maps token ids back to text.

        Stops at the first `[EOS]` and drops `[PAD]` and `[BOS]`; `[UNK]`
        is kept.

        Args:
            ids: integer ids, shape (length,) or (batch, length): a list, a
                NumPy array, a backend tensor, a `tf.Tensor` or a
                `tf.RaggedTensor`.

        Returns:
            A string `tf.Tensor`: a scalar for 1-D `ids`, else (batch,).
        """
        if keras.ops.is_tensor(ids) and not isinstance(ids, tf.Tensor):
            ids = keras.ops.convert_to_numpy(ids)  # A JAX or torch tensor.
        if not isinstance(ids, (tf.Tensor, tf.RaggedTensor)):
            try:
                ids = tf.convert_to_tensor(np.asarray(ids))
            except ValueError:  # A list of lists of different lengths.
                ids = tf.ragged.constant(ids)
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=PAD_ID)
        return _map_batch(self._detokenize_fn, tf.cast(ids, "int32"))

    def _tokenize_ops(self, strings):
        return self._tokenize_words(split_words(strings, self.lowercase))

    def _tokens_ops(self, strings):
        return tf.gather(self._vocabulary_tensor, self._tokenize_ops(strings))

    def _detokenize_ops(self, ids):
        # Out-of-range ids would be gathered as zeros on a GPU rather than
        # raise an error.
        checks = [
            tf.debugging.assert_non_negative(ids, "Token ids must be >= 0."),
            tf.debugging.assert_less(
                ids,
                self.vocabulary_size,
                "Token ids must be < vocabulary_size.",
            ),
        ]
        with tf.control_dependencies(checks):
            ids = tf.identity(ids)
        before_eos = tf.math.cumsum(tf.cast(ids == EOS_ID, "int32"), 1) == 0
        keep = before_eos & (ids != PAD_ID) & (ids != BOS_ID)
        tokens = tf.gather(
            self._vocabulary_tensor, tf.ragged.boolean_mask(ids, keep)
        )
        return self._join_tokens(tokens)

    def save(self, path):
        """Saves `vocabulary.txt` (tokens in id order) and `tokenizer.json`.

        Args:
            path: the folder; created if needed.
        """
        path = pathlib.Path(path)
        path.mkdir(parents=True, exist_ok=True)
        (path / VOCABULARY_FILE).write_text(
            "".join(token + "\n" for token in self._vocabulary),
            encoding="utf-8",
        )
        config = {"class_name": type(self).__name__, **self.get_config()}
        (path / CONFIG_FILE).write_text(
            json.dumps(config, indent=2) + "\n", encoding="utf-8"
        )

    @classmethod
    def load(cls, path):
        """Loads a tokenizer saved by `save()`."""
        tokenizer = load_tokenizer(path)
        if not isinstance(tokenizer, cls):
            raise ValueError(
                f"{str(path)!r} holds a {type(tokenizer).__name__}, not a "
                f"{cls.__name__}. Use `load_tokenizer(path)` to load any "
                "tokenizer."
            )
        return tokenizer

    def get_config(self):
        return {"lowercase": self.lowercase}

    @classmethod
    def _from_folder(cls, path, config):
        """The tokenizer of a folder written by `save()`."""
        return cls(path / VOCABULARY_FILE, **config)


class WordTokenizer(Tokenizer):
    """Word-level tokenizer with a frequency shortlist.

    Words outside the vocabulary map to `[UNK]`, as in the paper's 30,000
    word shortlists (Bahdanau et al., 2015, section 4.1).

    Args:
        vocabulary: list of tokens or path of a file with one per line,
            starting with `RESERVED_TOKENS`.
        lowercase: whether to lowercase text before tokenizing.

    Example:

    >>> tokenizer = WordTokenizer.from_texts(
    ...     ["Das ist gut.", "Das ist schlecht."], max_vocabulary_size=30000
    ... )
    >>> tokenizer.tokenize("Das ist neu.")
    <tf.Tensor: shape=(4,), dtype=int32, numpy=array([5, 6, 1, 4], ...)>
    >>> tokenizer.detokenize([5, 6, 1, 4, 3, 0])
    <tf.Tensor: shape=(), dtype=string, numpy=b'Das ist [UNK].'>
    """

    def __init__(self, vocabulary, lowercase=False):
        super().__init__(vocabulary, lowercase)
        self.lookup_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                self._vocabulary_tensor,
                tf.range(self.vocabulary_size, dtype="int32"),
            ),
            default_value=UNK_ID,
        )

    @classmethod
    def from_texts(cls, texts, max_vocabulary_size=30000, lowercase=False):
        """Builds the vocabulary of the most frequent words of `texts`.

        Args:
            texts: list of strings (e.g. the training sentences of one
                language).
            max_vocabulary_size: the most tokens, reserved ones included.
                Ties in frequency are broken alphabetically, so the
                vocabulary is deterministic.
            lowercase: whether to lowercase text before tokenizing.

        Returns:
            A `WordTokenizer`.
        """
        _check_vocabulary_size(max_vocabulary_size)
        counts = collections.Counter()
        # Batches bound the memory of the ragged tensor of all words.
        for start in range(0, len(texts), 100_000):
            words = split_words(
                tf.constant(texts[start : start + 100_000]), lowercase
            )
            counts.update(words.flat_values.numpy().tolist())
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        shortlist = [
            word.decode("utf-8")
            for word, _ in ranked[: max_vocabulary_size - len(RESERVED_TOKENS)]
        ]
        return cls(list(RESERVED_TOKENS) + shortlist, lowercase)

    def _tokenize_words(self, words):
        return tf.ragged.map_flat_values(self.lookup_table.lookup, words)

    def _tokens_ops(self, strings):
        return split_words(strings, self.lowercase)

    def _join_tokens(self, tokens):
        return join_words(tf.strings.reduce_join(tokens, -1, separator=" "))


class WordPieceTokenizer(Tokenizer):
    """Subword tokenizer: keras-hub's WordPiece on top of `split_words()`.

    Each word of `WordTokenizer` becomes pieces (`"##"` marks a piece that
    continues a word), or a single `[UNK]` if the pieces cannot spell it.
    A SavedModel needs the TensorFlow Text ops (`import tensorflow_text`;
    stock TF Serving links them).

    Args:
        vocabulary: list of tokens or path of a file with one per line,
            starting with `RESERVED_TOKENS`.
        lowercase: whether to lowercase text before tokenizing.

    Example:

    >>> texts = ["Das Fahrrad ist neu.", "Die Fahrräder sind neu."]
    >>> tokenizer = WordPieceTokenizer.from_texts(
    ...     (texts + ["Das Rad ist alt."]) * 10, max_vocabulary_size=100
    ... )
    >>> tokenizer.tokens("Die Räder sind alt.")
    <tf.Tensor: shape=(9,), dtype=string, numpy=array([b'Die', b'R',
        b'##\xc3\xa4', b'##d', b'##e', b'##r', b'sind', b'alt', b'.'], ...)>
    """

    def __init__(self, vocabulary, lowercase=False):
        import keras_hub

        super().__init__(vocabulary, lowercase)
        # A bound method, not the layer: tf.Module would track a keras
        # layer that is never built.
        self._piece_ids = keras_hub.tokenizers.WordPieceTokenizer(
            vocabulary=self._vocabulary,
            lowercase=False,  # Done by split_words().
            strip_accents=False,
            split=False,
            oov_token=UNK,
            dtype="int32",
        ).tokenize

    @classmethod
    def from_texts(cls, texts, max_vocabulary_size=8000, lowercase=False):
        """Learns a WordPiece vocabulary from `texts`.

        keras-hub's learner is pure Python and skips pieces seen fewer than
        10 times: on the German side of `ding_de_en("train")` it takes about
        3 minutes (2 CPU cores) and returns 2,686 tokens, whatever the
        maximum above that.

        Args:
            texts: list of strings.
            max_vocabulary_size: the most tokens, reserved ones included.
            lowercase: whether to lowercase text before tokenizing.

        Returns:
            A `WordPieceTokenizer`.
        """
        import keras_hub

        _check_vocabulary_size(max_vocabulary_size)
        words = (
            tf.data.Dataset.from_tensor_slices(tf.constant(texts))
            .batch(1024)
            .map(lambda text: split_words(text, lowercase))
        )
        vocabulary = keras_hub.tokenizers.compute_word_piece_vocabulary(
            words,
            max_vocabulary_size,
            split=False,
            reserved_tokens=list(RESERVED_TOKENS),
        )
        return cls(vocabulary, lowercase)

    def _tokenize_words(self, words):
        return self._piece_ids(words)

    def _join_tokens(self, tokens):
        text = tf.strings.reduce_join(tokens, -1, separator=" ")
        return join_words(tf.strings.regex_replace(text, " ##", ""))


class SentencePieceTokenizer(Tokenizer):
    """Subword tokenizer: a SentencePiece model (unigram or BPE).

    SentencePiece (Kudo & Richardson, 2018, arXiv:1808.06226) learns its
    pieces from raw text, spaces included (`"▁"` starts a word), so
    `detokenize(tokenize(text))` gives back `normalise_text(text)` whenever
    every character was seen in training; an unseen one becomes `[UNK]`.
    Small vocabularies (2k-8k pieces) pay on small corpora (Sennrich &
    Zhang, 2019, arXiv:1905.11901). Tokenizing needs tf-text's ops (stock
    TF Serving links them). The model is learnt with `sentencepiece`
    itself: keras-hub's `compute_sentence_piece_proto()` fixes NFKC
    normalisation (`"…"` would come back as `"..."`) and names the
    reserved pieces `<pad>`, `<unk>`, ... instead of `RESERVED_TOKENS`.

    Args:
        proto: the serialized SentencePiece model (bytes) or the path of a
            `.model` file.
        lowercase: whether to lowercase text before tokenizing.

    Example:

    >>> tokenizer = SentencePieceTokenizer.from_texts(
    ...     ["Das Haus ist groß.", "Die Häuser sind klein."] * 50,
    ...     max_vocabulary_size=40,
    ... )
    >>> tokenizer.detokenize(tokenizer.tokenize("Das Haus ist klein."))
    <tf.Tensor: shape=(), dtype=string, numpy=b'Das Haus ist klein.'>
    """

    MODEL_FILE = "sentencepiece.model"
    MODEL_TYPES = ("unigram", "bpe")

    def __init__(self, proto, lowercase=False):
        import tensorflow_text

        if isinstance(proto, (str, pathlib.Path)):
            proto = pathlib.Path(proto).read_bytes()
        self._proto = bytes(proto)
        model = tensorflow_text.SentencepieceTokenizer(model=self._proto)
        pieces = model.id_to_string(tf.range(model.vocab_size())).numpy()
        super().__init__([piece.decode("utf-8") for piece in pieces], lowercase)

    @classmethod
    def from_texts(
        cls,
        texts,
        max_vocabulary_size=8000,
        lowercase=False,
        model_type="unigram",
    ):
        """Learns a SentencePiece model of exactly `max_vocabulary_size`.

        Args:
            texts: list of strings (one language, or both for a joint
                vocabulary).
            max_vocabulary_size: the number of pieces, reserved ones
                included; more than the texts can fill is an error.
            lowercase: whether to lowercase text before tokenizing.
            model_type: `"unigram"` (Kudo, 2018) or `"bpe"` (Sennrich et
                al., 2016).

        Returns:
            A `SentencePieceTokenizer`.
        """
        import sentencepiece

        _check_vocabulary_size(max_vocabulary_size)
        if model_type not in cls.MODEL_TYPES:
            raise ValueError(
                f"`model_type` must be one of {cls.MODEL_TYPES}. Received: "
                f"model_type={model_type!r}"
            )
        lines = [
            line.decode("utf-8")
            for line in normalise_text(tf.constant(texts), lowercase).numpy()
        ]
        writer = io.BytesIO()
        with tempfile.TemporaryDirectory() as folder:
            rules = pathlib.Path(folder) / "normalization_rules.tsv"
            rules.write_text(_SENTENCEPIECE_RULES, "utf-8")
            try:
                sentencepiece.SentencePieceTrainer.train(
                    sentence_iterator=iter(lines),
                    model_writer=writer,
                    vocab_size=max_vocabulary_size,
                    model_type=model_type,
                    # The text is normalised by normalise_text() alone, so
                    # that every seen character comes back as it was.
                    normalization_rule_tsv=str(rules),
                    character_coverage=1.0,
                    pad_id=PAD_ID,
                    unk_id=UNK_ID,
                    bos_id=BOS_ID,
                    eos_id=EOS_ID,
                    pad_piece=PAD,
                    unk_piece=UNK,
                    bos_piece=BOS,
                    eos_piece=EOS,
                    num_threads=1,  # deterministic
                    minloglevel=2,  # the trainer's own log: errors only
                )
            except RuntimeError as error:
                raise ValueError(
                    "SentencePiece could not learn a vocabulary of "
                    f"max_vocabulary_size={max_vocabulary_size} from "
                    f"{len(lines)} texts: {error}"
                ) from None
        return cls(writer.getvalue(), lowercase)

    def _tokenize_ops(self, strings):
        import tensorflow_text

        # Built inside the graph function, not once in __init__: the model
        # resource belongs to the kernel that made it, and eager kernels
        # are dropped by `tf.random.set_seed()` (so by Keras' seeding),
        # after which every call fails with NotFoundError. In the graph,
        # the model is parsed once and lives as long as the function.
        model = tensorflow_text.SentencepieceTokenizer(model=self._proto)
        text = normalise_text(strings, self.lowercase)
        return tf.cast(model.tokenize(text), "int32")

    def _join_tokens(self, tokens):
        text = tf.strings.reduce_join(tokens, -1)
        return tf.strings.strip(tf.strings.regex_replace(text, "▁", " "))

    def save(self, path):
        """Saves `sentencepiece.model` besides the files of `Tokenizer`."""
        super().save(path)
        (pathlib.Path(path) / self.MODEL_FILE).write_bytes(self._proto)

    @classmethod
    def _from_folder(cls, path, config):
        return cls(path / cls.MODEL_FILE, **config)


TOKENIZERS = {
    "word": WordTokenizer,
    "wordpiece": WordPieceTokenizer,
    "unigram": SentencePieceTokenizer,
    "bpe": SentencePieceTokenizer,
}


def build_tokenizer(kind, texts, max_vocabulary_size, lowercase=False):
    """Builds a tokenizer of the given kind from training texts.

    Args:
        kind: `"word"` (frequency shortlist), `"wordpiece"`, or the
            SentencePiece subwords `"unigram"` and `"bpe"`.
        texts: list of strings in one language.
        max_vocabulary_size: the most tokens, reserved ones included; the
            paper uses 30,000 words.
        lowercase: whether to lowercase text before tokenizing.

    Returns:
        A `Tokenizer` of the class `TOKENIZERS[kind]`.

    Example:

    >>> pairs = ding_de_en("train")
    >>> source_tokenizer = build_tokenizer(
    ...     "word", [source for source, _ in pairs], 30000
    ... )
    """
    if kind not in TOKENIZERS:
        raise ValueError(
            f"`kind` must be one of {sorted(TOKENIZERS)}. Received: "
            f"kind={kind!r}"
        )
    texts = list(texts)
    if not texts:
        raise ValueError("`texts` is empty: a vocabulary needs some text.")
    cls = TOKENIZERS[kind]
    options = {"model_type": kind} if cls is SentencePieceTokenizer else {}
    return cls.from_texts(texts, max_vocabulary_size, lowercase, **options)


def load_tokenizer(path):
    """Loads any tokenizer saved with `Tokenizer.save(path)`.

    Args:
        path: the folder holding `vocabulary.txt` and `tokenizer.json`.

    Returns:
        A `WordTokenizer`, `WordPieceTokenizer` or `SentencePieceTokenizer`.
    """
    path = pathlib.Path(path)
    config_path = path / CONFIG_FILE
    if not config_path.is_file():
        raise FileNotFoundError(
            f"No {CONFIG_FILE} in {str(path)!r}: not a folder written by "
            "`Tokenizer.save()`."
        )
    config = json.loads(config_path.read_text(encoding="utf-8"))
    class_name = config.pop("class_name")
    classes = {cls.__name__: cls for cls in TOKENIZERS.values()}
    if class_name not in classes:
        raise ValueError(
            f"Unknown tokenizer class in {str(config_path)!r}. Received: "
            f"class_name={class_name!r}; expected one of {sorted(classes)}."
        )
    return classes[class_name]._from_folder(path, config)


def _check_vocabulary_size(max_vocabulary_size):
    if max_vocabulary_size <= len(RESERVED_TOKENS):
        raise ValueError(
            "`max_vocabulary_size` must leave room for tokens besides the "
            f"{len(RESERVED_TOKENS)} reserved ones. Received: "
            f"max_vocabulary_size={max_vocabulary_size}"
        )


def _map_batch(function, inputs):
    """Calls a graph function of batches on a batch or a single example."""
    if inputs.shape.rank == len(function.input_signature[0].shape) - 1:
        return function(inputs[tf.newaxis])[0]
    return function(inputs)


def _as_strings(strings):
    if isinstance(strings, (tf.Tensor, tf.RaggedTensor)):
        return strings
    strings = tf.convert_to_tensor(strings, dtype="string")
    if strings.shape.rank > 1:
        raise ValueError(
            "Expected a string or a 1-D batch of strings. Received: shape="
            f"{strings.shape}"
        )
    return strings
