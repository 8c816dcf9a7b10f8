"""Your own training script: the public API of keras_bahdanau, no config file.

Builds SentencePiece (or word) tokenizers, their `TranslationPreprocessor`
(the tf.data pipeline) and an RNNsearch, trains it with `model.fit` and
Keras callbacks, translates the dev set with beam search, saves the
translator as a preset (`Translator.from_preset` loads it back) and exports
a TF Serving SavedModel. Runs unchanged on every backend:

    KERAS_BACKEND=jax python examples/train_with_fit.py \
        --source train.de --target train.en --epochs 10
"""

import argparse
import pathlib

from keras_bahdanau.startup import start_tensorflow

# Before Keras loads TensorFlow: without its C++ start-up log.
start_tensorflow()

import keras

from keras_bahdanau import data
from keras_bahdanau import models
from keras_bahdanau import training
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.preprocessor import TranslationPreprocessor
from keras_bahdanau.translator import Translator


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", required=True, help="one sentence a line")
    parser.add_argument("--target", required=True, help="its translations")
    parser.add_argument("--run-dir", default="runs/train_with_fit")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--tokenizer", default="unigram")
    parser.add_argument("--vocabulary-size", type=int, default=4000)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    args = parser.parse_args(argv)
    run_dir = pathlib.Path(args.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)

    splits = data.split_pairs(
        data.read_parallel_files(args.source, args.target)
    )
    sources, targets = zip(*splits["train"], strict=True)
    source = data.build_tokenizer(args.tokenizer, sources, args.vocabulary_size)
    target = data.build_tokenizer(args.tokenizer, targets, args.vocabulary_size)
    # The text pipeline of training, translation and the SavedModel.
    preprocessor = TranslationPreprocessor(source, target)
    train, _ = preprocessor.make_dataset(
        splits["train"], batch_size=args.batch_size, seed=1
    )
    dev, _ = preprocessor.make_dataset(splits["dev"], shuffle=False)

    model = models.RNNSearch(
        source.vocabulary_size,
        target.vocabulary_size,
        embedding_dim=args.dim,
        hidden_dim=args.dim,
        maxout_dim=args.dim,
        dropout=0.2,
        tie_embeddings=True,
        initialization="glorot",
    )
    training.compile_model(model, "adam", args.learning_rate, 0.1)
    model.fit(
        train,
        validation_data=dev,
        epochs=args.epochs,
        shuffle=False,  # the dataset reshuffles itself each epoch
        callbacks=[
            keras.callbacks.ReduceLROnPlateau(factor=0.5, patience=1),
            keras.callbacks.EarlyStopping(
                patience=3, restore_best_weights=True
            ),
            keras.callbacks.CSVLogger(run_dir / "training_log.csv"),
        ],
    )

    translator = Translator(model, preprocessor)
    dev_sources = [s for s, _ in splits["dev"][:5]]
    for sentence, translation in zip(
        dev_sources,
        translator.translate(dev_sources, SearchConfig(beam_size=5)),
        strict=True,
    ):
        print(f"{sentence}\n  -> {translation.text}")

    translator.save_to_preset(run_dir / "preset")
    print(translator.export(run_dir / "saved_model"))


if __name__ == "__main__":
    main()
