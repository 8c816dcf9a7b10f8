"""`SentencePieceTokenizer`: a SentencePiece model (unigram or BPE)."""

import io
import pathlib
import tempfile

import tensorflow as tf

from keras_bahdanau.reserved import BOS
from keras_bahdanau.reserved import BOS_ID
from keras_bahdanau.reserved import EOS
from keras_bahdanau.reserved import EOS_ID
from keras_bahdanau.reserved import PAD
from keras_bahdanau.reserved import PAD_ID
from keras_bahdanau.reserved import UNK
from keras_bahdanau.reserved import UNK_ID
from keras_bahdanau.tokenizers.tokenizer import Tokenizer
from keras_bahdanau.tokenizers.tokenizer import _check_vocabulary_size
from keras_bahdanau.tokenizers.words import normalise_text

# SentencePiece's own normalisation is left to normalise_text(), which turns
# every control character into a space. This one rule (tab -> space) says
# the same and never applies, as no tab is left. A model with no rule at all
# ("identity") makes the SentencePiece inside tf-text log "precompiled_charsmap
# is empty" each time it loads the model, straight to file descriptor 2 and
# past any log level: its logging can be neither set nor reached.
_SENTENCEPIECE_RULES = "9\t20\n"  # U+0009 -> U+0020, hex code points


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
        threads=1,
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
            threads: int >= 1, the trainer's threads. The result depends
                on their number (each thread sums its share of the
                sentences' statistics in floating point): the same
                number learns the same model, and 1 the model of earlier
                releases. Unigram on 100k sentences of ~16 words: 4.4 s
                with 1, 3.2 s with 2 (2 cores).

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
                    num_threads=threads,  # the same number, one result
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
