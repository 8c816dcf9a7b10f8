"""The train config's schema: keys, defaults, recipes and allowed values.

Plain data that imports nothing: `keras_bahdanau.config` resolves configs
against it before Keras or a backend loads.
"""

# The schema: every key a config may set, with its default.
DEFAULTS = {
    "run_dir": "runs/ding_de_en",
    # "small_data" (these defaults) or "paper" (RECIPES["paper"] on top).
    "recipe": "small_data",
    "data": {
        # "ding_de_en", "bible_en_fr" (World English Bible -> Louis Segond
        # 1910), "files" (aligned files) or "tsv".
        "corpus": "ding_de_en",
        "source_file": "",
        "target_file": "",
        # "files" with these: explicit dev and test sets; without them the
        # pairs of source_file/target_file are split by hash.
        "dev_source_file": "",
        "dev_target_file": "",
        "test_source_file": "",
        "test_target_file": "",
        "tsv_file": "",
        "max_length": 50,
        # Training batches hold pairs padded to the same multiple of this
        # many tokens (data.make_dataset).
        "bucket_width": 10,
        # N > 0: instead (bucket_width is then unused), to the N widths
        # that pad the training pairs least (data.bucket_widths), the
        # widest max_length + 1; dev alike. The training log prints them.
        "buckets": 0,
        "max_train_pairs": 0,  # 0: all
        # "files" and "tsv" without dev and test files: the most pairs of
        # each of dev and test (the split's fractions shrink on a large
        # corpus, data.held_out_fractions); 0: 5% each, uncapped. Dev
        # files are cut to it too (their first pairs), test files not.
        "max_held_out_pairs": 3000,
        # "auto": stream the training pairs of a "files" or "tsv" corpus
        # from disk (data.stream) when they outnumber the shuffle buffer;
        # "true": stream any corpus; "false": hold them in memory.
        "stream": "auto",
        # The pairs a streamed corpus is shuffled in (reshuffled each pass).
        "shuffle_buffer": 100_000,
        # ding_de_en: add up to N of the dictionary's term pairs for the
        # training sentences' words (data.ding.ding_terms); 0: none.
        "dictionary_pairs": 0,
        "lowercase": False,
    },
    "tokenizer": {
        # "word", "wordpiece", or SentencePiece "unigram" or "bpe".
        "kind": "unigram",
        "source_vocabulary_size": 4000,
        "target_vocabulary_size": 4000,
        # One vocabulary learnt from both languages (the source size).
        "joint": False,
        # Vocabularies are learnt from this many training pairs, drawn at
        # random by the run's seed (data.sample_pairs); all of a smaller
        # corpus. 0: all.
        "sample_sentences": 300_000,
        # SentencePiece's threads: the same number gives the same
        # vocabulary; 1 (the default) gives the vocabulary of earlier
        # releases. Word counts use the threads too, whatever the number.
        "threads": 1,
    },
    "model": {
        # "rnnsearch", "rnnencdec" or "pervasive_attention".
        "architecture": "rnnsearch",
        # Unset: DEFAULT_PRESETS[architecture]; "": the constructor's
        # defaults.
        "preset": "rnnsearch_tiny",
        # Overrides of the preset; 0 keeps the preset's value.
        "embedding_dim": 0,
        "hidden_dim": 0,
        "maxout_dim": 0,
        # Pervasive Attention's DenseNet (0: the preset's value);
        # reduction_channels: a 1x1 convolution to this many channels
        # before the DenseNet (0: none).
        "num_layers": 0,
        "growth_rate": 0,
        "kernel_size": 0,
        "reduction_channels": 0,
        # Regularisation (see RNNSearch); all 0 in the paper.
        "dropout": 0.2,  # on the readout t_i
        "embedding_dropout": 0.1,
        "word_dropout": 0.1,
        "hidden_dropout": 0.1,
        "recurrent_dropout": 0.0,
        "tie_embeddings": True,
        "initialization": "glorot",
    },
    "training": {
        "optimizer": "adam",  # or "adadelta", the paper's
        "learning_rate": 0.002,  # 0: the optimizer's default
        "clipnorm": 1.0,
        "label_smoothing": 0.1,
        "epochs": 10,
        # Wall-clock budget of training, in minutes (0: none), spent to its
        # end: the last epoch is cut short if need be (callbacks.TimeBudget).
        "max_minutes": 0.0,
        "batch_size": 32,
        "precision": "float32",  # or "mixed_float16", "mixed_bfloat16"
        # XLA for the train step: "auto" is on for JAX and for TensorFlow
        # with a GPU, off on TensorFlow's CPU (where dropout's RNG is slow
        # under XLA), under the mirrored strategy and on torch,
        # where "true" means torch.compile (training.jit_compile_argument).
        "jit_compile": "auto",
        # "bleu": the best checkpoint, early stopping and learning-rate
        # decay follow dev BLEU; "loss": dev loss.
        "selection": "bleu",
        "patience": 3,  # early stopping, in epochs
        # Learning rate times lr_decay after lr_patience epochs without
        # progress on the selection criterion; 0: constant.
        "lr_decay": 0.5,
        "lr_patience": 2,
        # Checkpoint averaging: the mean of the last N epochs' weights
        # becomes best.keras if it beats the best epoch on the selection
        # criterion; 0: off.
        "average_last": 0,
        "seed": 1234,
        "backup_every_steps": 100,
    },
    "evaluation": {
        "beam_size": 5,
        "max_sentences": 0,  # 0: the whole dev/test split
        # Dev sentences translated after each epoch for selection on BLEU
        # (the first N of the dev split; 0: all).
        "selection_sentences": 300,
        # GNMT length penalty alpha of the search (0: none). Unset: the
        # architecture's value in LENGTH_PENALTIES, chosen on dev BLEU.
        "length_penalty": 0.0,
        # Unknown words replaced by their most attended source word
        # (word-level tokenizers only).
        "replace_unknown": True,
    },
    "distribution": {
        # "none", "data_parallel" or "model_parallel" (JAX), "mirrored"
        # (TensorFlow); training.batch_size stays the global batch.
        "strategy": "none",
        "devices": 0,  # 0: all; on a CPU-only host, N splits the CPU
        "model_shards": 0,  # model_parallel: devices per vocabulary; 0: all
    },
}

FLAGS = {
    "--run-dir": "run_dir",
    "--corpus": "data.corpus",
    "--tokenizer": "tokenizer.kind",
    "--architecture": "model.architecture",
    "--preset": "model.preset",
    "--optimizer": "training.optimizer",
    "--epochs": "training.epochs",
    "--batch-size": "training.batch_size",
    "--precision": "training.precision",
    "--distribution": "distribution.strategy",
    "--devices": "distribution.devices",
}

# The paper's recipe (section 4.2, appendix B): word shortlists of 30,000,
# N(0, 0.01^2) initialisation, no regularisation, Adadelta, batches of 80,
# early stopping on the dev loss.
RECIPES = {
    "small_data": {},
    "paper": {
        "tokenizer": {
            "kind": "word",
            "source_vocabulary_size": 30000,
            "target_vocabulary_size": 30000,
        },
        "model": {
            # models.translation_model.REGULARIZATION: all off.
            "dropout": 0.0,
            "embedding_dropout": 0.0,
            "word_dropout": 0.0,
            "hidden_dropout": 0.0,
            "recurrent_dropout": 0.0,
            "tie_embeddings": False,
            "initialization": "paper",
        },
        "training": {
            "optimizer": "adadelta",
            "learning_rate": 0.0,
            "label_smoothing": 0.0,
            "batch_size": 80,
            "selection": "loss",
            "lr_decay": 0.0,
        },
    },
}

# The `[model]` keys each architecture takes besides `architecture` and
# `preset` (models.factory.build_model); another key set for it is an
# error. Pervasive Attention's keys left unset are the preset's values.
_RNN_KEYS = (
    "embedding_dim",
    "hidden_dim",
    "maxout_dim",
    "dropout",
    "embedding_dropout",
    "word_dropout",
    "hidden_dropout",
    "recurrent_dropout",
    "tie_embeddings",
    "initialization",
)
MODEL_KEYS = {
    "rnnsearch": _RNN_KEYS,
    "rnnencdec": _RNN_KEYS,
    "pervasive_attention": (
        "embedding_dim",
        "num_layers",
        "growth_rate",
        "kernel_size",
        "reduction_channels",
        "dropout",
        "tie_embeddings",
    ),
}
# The preset of an architecture whose config names none.
DEFAULT_PRESETS = {
    "rnnsearch": "rnnsearch_tiny",
    "rnnencdec": "rnnencdec_tiny",
    "pervasive_attention": "pervasive_attention_tiny",
}
# `evaluation.length_penalty` when the config sets none: the GNMT alpha,
# chosen on dev BLEU (examples/tune_length_penalty.py; the records are in
# docs/results.md). RNNsearch, Ding de-en dev: 5.50 at 0, 5.83 at 1.0,
# 6.00 at 1.2, then 5.68 and 4.30 at 1.4 and 1.6 (outputs too long): 1.0,
# short of the cliff, as one corpus cannot say where it lies on another.
# Pervasive Attention: no gain on Ding dev (0.72 at 0, 0.58-0.72 up to
# 1.0; its outputs stay short at any alpha); on Bible en-fr dev 7.90 at 0,
# 8.13 at 1.0, then 4.88 at 1.4 (outputs 2.1x too long): 0, as the small
# gain lies next to the cliff. RNNencdec: not tuned.
LENGTH_PENALTIES = {
    "rnnsearch": 1.0,
    "rnnencdec": 0.0,
    "pervasive_attention": 0.0,
}

CHOICES = {
    "recipe": tuple(RECIPES),
    # data.loading.CORPORA and STREAM, tokenizers.TOKENIZERS,
    # models.factory.ARCHITECTURES, training.OPTIMIZERS and JIT_COMPILE,
    # and distribution.STRATEGIES, written out (see the module docstring);
    # tests/config_test.py keeps them equal.
    "data.corpus": ("ding_de_en", "bible_en_fr", "files", "tsv"),
    "data.stream": ("auto", "true", "false"),
    "tokenizer.kind": ("word", "wordpiece", "unigram", "bpe"),
    "model.architecture": ("rnnsearch", "rnnencdec", "pervasive_attention"),
    "training.optimizer": ("adadelta", "adam"),
    "training.selection": ("bleu", "loss"),
    "training.precision": ("float32", "mixed_float16", "mixed_bfloat16"),
    "training.jit_compile": ("auto", "true", "false"),
    "distribution.strategy": (
        "none",
        "data_parallel",
        "model_parallel",
        "mirrored",
    ),
}


# The numeric keys with a range: (test, the range in words).
_POSITIVE = (lambda value: value > 0, "positive")
_ALL_OR_POSITIVE = (lambda value: value >= 0, "0 (all) or positive")
_FRACTION = (lambda value: 0.0 <= value < 1.0, "in [0, 1)")
_OFF_OR_POSITIVE = (lambda value: value >= 0, "0 (off) or positive")
_PRESET_OR_POSITIVE = (lambda value: value >= 0, "0 (the preset's) or positive")
_OFF_OR_SEVERAL = (lambda value: value == 0 or value >= 2, "0 (off) or >= 2")
RANGES = {
    "data.max_length": _POSITIVE,
    "data.bucket_width": _POSITIVE,
    "data.buckets": (lambda value: value >= 0, "0 (bucket_width) or positive"),
    "data.max_train_pairs": _ALL_OR_POSITIVE,
    "data.dictionary_pairs": _OFF_OR_POSITIVE,
    "data.max_held_out_pairs": (lambda value: value >= 0, "0 (5%) or positive"),
    "data.shuffle_buffer": _POSITIVE,
    "tokenizer.sample_sentences": _ALL_OR_POSITIVE,
    "tokenizer.threads": _POSITIVE,
    "training.epochs": _POSITIVE,
    "training.max_minutes": _OFF_OR_POSITIVE,
    "training.batch_size": _POSITIVE,
    "training.backup_every_steps": _POSITIVE,
    "training.label_smoothing": _FRACTION,
    "training.lr_decay": _FRACTION,
    "training.lr_patience": _POSITIVE,
    "training.average_last": _OFF_OR_SEVERAL,
    "evaluation.selection_sentences": _ALL_OR_POSITIVE,
    "evaluation.length_penalty": _OFF_OR_POSITIVE,
    "model.num_layers": _PRESET_OR_POSITIVE,
    "model.growth_rate": _PRESET_OR_POSITIVE,
    "model.kernel_size": _PRESET_OR_POSITIVE,
    "model.reduction_channels": _OFF_OR_POSITIVE,
    "distribution.devices": _ALL_OR_POSITIVE,
    "distribution.model_shards": _ALL_OR_POSITIVE,
}
