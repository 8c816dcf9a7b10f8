"""`Tokenizer`: the base class of the tokenizers.

Every tokenizer is a `tf.Module` whose `tokenize()`, `tokens()` and
`detokenize()` are graph functions, so eager calls, `tf.data` and an
exported SavedModel (tracked with `keras.export.ExportArchive.track()`)
run the same ops.

Every vocabulary starts with the reserved tokens `[PAD]`, `[UNK]`, `[BOS]`,
`[EOS]` at ids 0-3. They cannot come out of text: `[` and `]` are split off.
"""

import collections
import functools
import json
import pathlib

import keras
import numpy as np
import tensorflow as tf

from keras_bahdanau.reserved import BOS_ID
from keras_bahdanau.reserved import EOS_ID
from keras_bahdanau.reserved import PAD_ID
from keras_bahdanau.reserved import RESERVED_TOKENS
from keras_bahdanau.reserved import UNK_ID
from keras_bahdanau.tokenizers.words import split_words

VOCABULARY_FILE = "vocabulary.txt"
CONFIG_FILE = "tokenizer.json"
# Every subclass by its name, as `tokenizer.json` names it (`load`).
_CLASSES = {}


class Tokenizer(tf.Module):
    """Base class: a vocabulary with reserved ids and graph-mode methods.

    Subclasses implement `_tokenize_words(words)` and `_join_tokens(tokens)`.

    Args:
        vocabulary: list of token strings, or the path of a file with one
            token per line. It must start with `RESERVED_TOKENS`.
        lowercase: whether to lowercase text before tokenizing.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _CLASSES[cls.__name__] = cls

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
        """Loads a tokenizer saved by `save()`, of whatever class it is.

        `Tokenizer.load` reads any of them; a subclass's `load` refuses
        the others.

        Args:
            path: the folder holding `vocabulary.txt` and `tokenizer.json`.

        Raises:
            FileNotFoundError: the folder has no `tokenizer.json`.
            ValueError: it holds an unknown class, or not a `cls`.
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
        if class_name not in _CLASSES:
            raise ValueError(
                f"Unknown tokenizer class in {str(config_path)!r}. Received: "
                f"class_name={class_name!r}; expected one of "
                f"{sorted(_CLASSES)}."
            )
        tokenizer = _CLASSES[class_name]._from_folder(path, config)
        if not isinstance(tokenizer, cls):
            raise ValueError(
                f"{str(path)!r} holds a {type(tokenizer).__name__}, not a "
                f"{cls.__name__}. Use `Tokenizer.load(path)` to load any "
                "tokenizer."
            )
        return tokenizer

    def get_config(self):
        return {"lowercase": self.lowercase}

    @classmethod
    def _from_folder(cls, path, config):
        """The tokenizer of a folder written by `save()`."""
        return cls(path / VOCABULARY_FILE, **config)


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
