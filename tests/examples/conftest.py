"""The examples' folder on `sys.path`, as for a script run as
`python examples/NAME.py`: compare_models.py and reproduce_bahdanau.py
`import comparison` from it."""

import pathlib
import sys

_EXAMPLES = str(pathlib.Path(__file__).parents[2] / "examples")
if _EXAMPLES not in sys.path:
    sys.path.insert(0, _EXAMPLES)
