"""Callbacks of `keras_bahdanau.trainer.train`, by concern.

`checkpointing`: checkpoints and backups written atomically, and training
stopped when they cannot be written or the weights are no longer finite.
`averaging`: the weights of the last epochs and their average.
`time_budget`: a wall-time budget. `dev_scores`: dev BLEU after each epoch.
"""

from keras_bahdanau.callbacks.averaging import EpochWeights
from keras_bahdanau.callbacks.averaging import average_weights
from keras_bahdanau.callbacks.averaging import epoch_weight_files
from keras_bahdanau.callbacks.checkpointing import BACKUP_METADATA
from keras_bahdanau.callbacks.checkpointing import BACKUP_WEIGHTS
from keras_bahdanau.callbacks.checkpointing import AtomicModelCheckpoint
from keras_bahdanau.callbacks.checkpointing import CheckpointError
from keras_bahdanau.callbacks.checkpointing import FiniteBackupAndRestore
from keras_bahdanau.callbacks.checkpointing import NonFiniteLoss
from keras_bahdanau.callbacks.checkpointing import check_finite
from keras_bahdanau.callbacks.checkpointing import inference_copy
from keras_bahdanau.callbacks.checkpointing import non_finite_variables
from keras_bahdanau.callbacks.checkpointing import save_atomically
from keras_bahdanau.callbacks.dev_scores import DevScores
from keras_bahdanau.callbacks.time_budget import TimeBudget
