"""Presets of `PervasiveAttention`.

`pervasive_attention_paper` is the configuration Elbayad et al. (2018)
compare with other systems on IWSLT'14 De-En (Sec. 4, and the authors'
`iwslt_l24` config): 128-dimensional embeddings, growth rate 32, 24
layers, 5x5 kernels masked to the past (5 source x 3 target positions),
dropout 0.2; these are also the constructor defaults. The paper's best
pooling concatenates max and self-attention pooling: pass
`pooling="max+attention"`. The authors' code also ties the output layer
to the target embedding (`tie_embeddings=True`), and its 2018 configs
halve the grid's channels with a 1x1 convolution before the DenseNet
(`input_channels=(ds + dt) // 2`). `pervasive_attention_small` trains
on a CPU; `pervasive_attention_tiny` is its shape with the tied output,
about 0.7M parameters with 4,000-piece vocabularies: the 2D network of
`examples/ding_de_en_pervasive.toml`, sized for the main job's
14-minute CPU budget (its decoding costs about as many products per
step as `rnnsearch_tiny`'s). The reduction stays off in the presets: it
cheapens training but not decoding, which then runs whole grid rows.
The vocabulary sizes are placeholders, like those of the RNN presets:
pass the sizes of your vocabularies.
"""

_SMALL = {
    "source_vocabulary_size": 8000,
    "target_vocabulary_size": 8000,
    "source_embedding_dim": 64,
    "target_embedding_dim": 64,
    "growth_rate": 16,
    "num_layers": 8,
    "kernel_size": 3,
    "bottleneck_factor": 4,
    "activation": "relu",
    "pooling": "max",
    "dropout": 0.1,
}

PERVASIVE_ATTENTION_PRESETS = {
    "pervasive_attention_paper": {
        "source_vocabulary_size": 8000,
        "target_vocabulary_size": 8000,
        "source_embedding_dim": 128,
        "target_embedding_dim": 128,
        "growth_rate": 32,
        "num_layers": 24,
        "kernel_size": 5,
        "bottleneck_factor": 4,
        "activation": "relu",
        "pooling": "max",
        "dropout": 0.2,
    },
    "pervasive_attention_small": _SMALL,
    # The small shape with the tied output.
    "pervasive_attention_tiny": {**_SMALL, "tie_embeddings": True},
}
