"""`DevScores`: dev BLEU and chrF after every epoch, for selection."""

import keras

from keras_bahdanau.metrics import corpus_scores


class DevScores(keras.callbacks.Callback):
    """Dev BLEU and chrF at the end of each epoch, as `val_bleu`/`val_chrf`.

    Scores the dev translations of the model being trained with
    sacreBLEU, into the epoch's logs: later callbacks (CSV log,
    TensorBoard, `EarlyStopping`, ...) see them and can monitor `val_bleu`
    (mode `max`). On small data the dev loss starts rising epochs before
    BLEU stops improving.

    Args:
        translate: a function of no argument returning the translations
            (list of str) of the dev sources with the current weights.
        references: list of str, one per dev source.
    """

    def __init__(self, translate, references):
        super().__init__()
        self.translate = translate
        self.references = list(references)

    def on_epoch_end(self, epoch, logs=None):
        scores = corpus_scores(self.translate(), self.references)
        if logs is not None:
            logs["val_bleu"] = scores["bleu"]
            logs["val_chrf"] = scores["chrf"]
