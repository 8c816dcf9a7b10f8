"""`SearchConfig`: the search options, their defaults and their checks."""

import dataclasses
import math

from keras import ops

from keras_bahdanau.validation import check_int
from keras_bahdanau.validation import check_number
from keras_bahdanau.validation import is_int

# Without `max_length`, sentence `i` may have `2 * Tx_i + 10` tokens.
DEFAULT_RELATIVE_MAX_LENGTH = (2.0, 10)


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """How to search: greedy or beam, penalties, maximum lengths.

    Frozen and hashable (the compiled searches are cached by it), and
    checked on construction. `search()` runs greedy search when
    `beam_size == 1` and both penalties are 0, beam search otherwise.
    In a serving graph `beam_size`, `n_best` and `length_penalty` may be
    scalar tensors (a request's options, checked there); beam search
    takes a tensor `length_penalty` only.

    Args:
        beam_size: int >= 1, the number of hypotheses kept alive.
        n_best: int in `[1, beam_size]`, hypotheses returned per sentence.
        length_penalty: GNMT `alpha >= 0` (0 = none); Wu et al. tune it in
            [0.6, 0.7] roughly.
        coverage_penalty: GNMT `beta >= 0` (0 = none).
        max_length: int >= 1, the most target tokens (EOS included), or
            None: at most `floor(a * Tx + b)` for a source of `Tx` tokens,
            `(a, b) = relative_max_length or DEFAULT_RELATIVE_MAX_LENGTH`.
        relative_max_length: None or `(a, b)`, `a >= 0`: sentence `i` has
            at most `floor(a * Tx_i + b)` tokens (and `max_length`).

    Example:

    ```python
    config = SearchConfig(beam_size=12, n_best=3, length_penalty=0.6)
    result = search(model, source_ids, config)
    ```

    Reference:
        Wu et al., 2016, "Google's Neural Machine Translation System",
        arXiv:1609.08144, §7 (length normalization, coverage penalty).
    """

    beam_size: int = 5
    n_best: int = 1
    length_penalty: float = 0.0
    coverage_penalty: float = 0.0
    max_length: int | None = None
    relative_max_length: tuple | None = None

    def __post_init__(self):
        if isinstance(self.relative_max_length, list):  # e.g. from JSON
            relative = tuple(self.relative_max_length)
            object.__setattr__(self, "relative_max_length", relative)
        check_max_length(
            self.max_length, self.relative_max_length, allow_none=True
        )
        # A scalar tensor (a serving request's option) is checked where it
        # is fed, in the graph.
        beam_size, n_best = self.beam_size, self.n_best
        if not ops.is_tensor(beam_size):
            check_int("beam_size", beam_size)
        is_static = not (ops.is_tensor(n_best) or ops.is_tensor(beam_size))
        if is_static and (not is_int(n_best) or not 1 <= n_best <= beam_size):
            raise ValueError(
                "`n_best` must be an int between 1 and `beam_size`. "
                f"Received: n_best={n_best!r}, beam_size={beam_size}"
            )
        why = "(a negative value would reward what the penalty discourages)"
        if not ops.is_tensor(self.length_penalty):
            check_number("length_penalty", self.length_penalty, why=why)
        check_number("coverage_penalty", self.coverage_penalty, why=why)

    def to_dict(self):
        """The fields as JSON values (`relative_max_length` a list).

        `SearchConfig.from_dict` reads it back: the one conversion of a
        search to and from a preset, a record or an export's metadata.
        Not with tensor fields (a serving request's).
        """
        fields = dataclasses.asdict(self)
        if self.relative_max_length is not None:
            fields["relative_max_length"] = list(self.relative_max_length)
        return fields

    @classmethod
    def from_dict(cls, fields):
        """The `SearchConfig` of a `to_dict` dict; missing fields default.

        Raises:
            ValueError: `fields` is not a dict, names a field
                `SearchConfig` does not have, or holds a bad value.
        """
        names = [field.name for field in dataclasses.fields(cls)]
        if not isinstance(fields, dict) or set(fields) - set(names):
            raise ValueError(
                f"A search must be a dict of the fields {names}. Received: "
                f"{fields!r}"
            )
        return cls(**fields)

    @property
    def is_greedy(self):
        return self.beam_size == 1 and not (
            self.length_penalty or self.coverage_penalty
        )

    def for_source_length(self, source_length):
        """This config with an int `max_length` for sources this wide.

        The searches need one: it fixes their output shape.
        """
        if self.max_length is not None:
            return self
        a, b = self.relative_max_length or DEFAULT_RELATIVE_MAX_LENGTH
        return dataclasses.replace(
            self,
            max_length=max(1, int(a * source_length + b)),
            relative_max_length=(a, b),
        )


def run_search(evaluation):
    """The `SearchConfig` of a config's `[evaluation]` table: its beam and
    length penalty, the rest at their defaults."""
    return SearchConfig(
        beam_size=evaluation["beam_size"],
        length_penalty=evaluation.get("length_penalty", 0.0),
    )


def as_search_config(search):
    """`search`, or `SearchConfig()` for None; a `ValueError` otherwise."""
    if search is None:
        return SearchConfig()
    if not isinstance(search, SearchConfig):
        raise ValueError(
            "`search` must be a keras_bahdanau.decoding.SearchConfig or "
            f"None. Received: search={search!r}"
        )
    return search


def check_max_length(max_length, relative_max_length, allow_none=False):
    """Raises a `ValueError` naming a bad `max_length` or
    `relative_max_length` (as for `SearchConfig`; `allow_none`: whether
    `max_length` may be None)."""
    check_int(
        "max_length",
        max_length,
        allow_none=allow_none,
        why="(it fixes the output shape)",
    )
    if relative_max_length is not None and (
        not isinstance(relative_max_length, tuple | list)
        or len(relative_max_length) != 2
        or not all(
            isinstance(x, int | float) and math.isfinite(x)
            for x in relative_max_length
        )
        or relative_max_length[0] < 0
    ):
        raise ValueError(
            "`relative_max_length` must be None or a pair (a, b) of "
            "numbers with a >= 0, giving at most floor(a * source_length "
            "+ b) tokens. Received: "
            f"relative_max_length={relative_max_length!r}"
        )
