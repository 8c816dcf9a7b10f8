"""The `keras-bahdanau` commands: one module per command."""
