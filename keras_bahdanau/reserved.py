"""The reserved tokens every vocabulary and model of the package shares.

Ids 0-3 of every vocabulary are `[PAD] [UNK] [BOS] [EOS]`, in this order:
the models mask id 0, the decoder starts from BOS and the searches stop at
EOS. A leaf module (it imports nothing of the package), read by `data`,
`models`, `decoding` and `training`.
"""

PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3
NUM_RESERVED_IDS = 4

PAD = "[PAD]"
UNK = "[UNK]"
BOS = "[BOS]"
EOS = "[EOS]"
RESERVED_TOKENS = (PAD, UNK, BOS, EOS)  # Ids 0, 1, 2, 3.
