import dataclasses
import warnings

import numpy as np
import pytest
from keras import ops

from keras_bahdanau.data import BOS_ID
from keras_bahdanau.data import EOS_ID
from keras_bahdanau.data import UNK_ID
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.preprocessor import TranslationPreprocessor
from keras_bahdanau.text import replace_unknown_words
from keras_bahdanau.translator import Translation
from keras_bahdanau.translator import Translator
from tests.run_fixture import MAX_LENGTH
from tests.run_fixture import PAIRS

SOURCES = [source for source, _ in PAIRS]
# One search config for most tests: on JAX and TensorFlow each new one
# (and batch shape) compiles a new program.
SEARCH = SearchConfig(beam_size=2, n_best=2, max_length=10)


def source_ids(translator, sentence):
    return translator.source_tokenizer.tokenize(sentence).numpy()[None]


def test_a_batch_translates_like_single_sentences_in_input_order(translator):
    sentences = SOURCES[3:6]  # Lengths 4, 6, 5: sorting reorders them.
    batched = translator.translate(
        sentences, SEARCH, batch_size=2, return_attention=True
    )
    assert len(batched) == len(sentences)
    for sentence, hypotheses in zip(sentences, batched, strict=True):
        singles = translator.translate(sentence, SEARCH, return_attention=True)
        assert len(hypotheses) == len(singles) == 2
        for translation, single in zip(hypotheses, singles, strict=True):
            assert isinstance(translation, Translation)
            assert isinstance(translation.text, str)
            assert str(translation) == translation.text
            assert single.target_tokens == translation.target_tokens
            assert single.text == translation.text
            np.testing.assert_allclose(
                single.score, translation.score, atol=1e-5
            )
            np.testing.assert_allclose(
                single.attention, translation.attention, atol=1e-5
            )
            tokens = translator.source_tokenizer.tokens(sentence).numpy()
            assert translation.source_tokens == [t.decode() for t in tokens]
            assert translation.target_tokens[-1] == "[EOS]"
            assert translation.attention.shape == (
                len(translation.target_tokens),
                len(translation.source_tokens),
            )
            np.testing.assert_allclose(
                translation.attention.sum(axis=1), 1.0, atol=1e-5
            )


@pytest.mark.parametrize("length_penalty", [0.0, 0.6])
def test_scores_are_model_log_probs_with_the_length_penalty(
    translator, length_penalty
):
    model, target = translator.model, translator.target_tokenizer
    sentence = SOURCES[4]
    hypotheses = translator.translate(
        sentence, dataclasses.replace(SEARCH, length_penalty=length_penalty)
    )
    assert len(hypotheses) == 2
    assert hypotheses[0].score >= hypotheses[1].score
    assert hypotheses[0].target_tokens != hypotheses[1].target_tokens
    source_ids = translator.source_tokenizer.tokenize(sentence).numpy()[None]
    for hypothesis in hypotheses:
        # Rescoring: teacher-forced log-probabilities of y + [EOS], on the
        # unpadded source (the translator pads it to 16 tokens).
        labels = [target.token_to_id(t) for t in hypothesis.target_tokens]
        # Padded to one length for all calls (fewer eager JAX compilations);
        # the decoder is causal, so padding changes no earlier logit.
        target_ids = np.zeros((1, SEARCH.max_length), "int32")
        target_ids[0, : len(labels)] = [BOS_ID, *labels[:-1]]
        logits = model({"source_ids": source_ids, "target_ids": target_ids})
        log_probs = ops.convert_to_numpy(ops.log_softmax(logits, axis=-1))[0]
        rescored = log_probs[np.arange(len(labels)), labels].sum()
        np.testing.assert_allclose(hypothesis.log_prob, rescored, atol=1e-4)
        # GNMT's lp(Y) = ((5 + |Y|) / 6)^alpha, as in decoding.beam_search.
        penalty = ((5 + len(labels)) / 6) ** length_penalty
        np.testing.assert_allclose(
            hypothesis.score, hypothesis.log_prob / penalty, rtol=1e-5
        )


def test_empty_sentences_translate_to_empty_strings(translator):
    results = translator.translate(
        ["", "   ", SOURCES[4]], SEARCH, return_attention=True
    )
    for hypotheses in results[:2]:
        (empty,) = hypotheses  # Only one hypothesis: the empty one.
        assert empty.text == ""
        assert empty.score == empty.log_prob == 0.0
        assert empty.source_tokens == empty.target_tokens == []
        assert empty.attention.shape == (0, 0)
    assert len(results[2]) == 2
    assert translator.translate("").text == ""
    assert translator.translate([]) == []


def test_long_sentences_are_truncated_with_a_warning(
    run_dir, translator, monkeypatch
):
    assert translator.max_source_length == MAX_LENGTH  # The preset's.
    assert translator.long_sources == "truncate"
    unlimited = Translator.from_preset(
        run_dir, max_source_length=None, long_sources="error"
    )
    assert unlimited.max_source_length is None
    assert unlimited.long_sources == "error"
    # The same translator (and compiled search) with a lower limit.
    monkeypatch.setattr(translator.preprocessor, "max_source_length", 3)
    with pytest.warns(UserWarning, match=r"1 of 2 sentences.*=3 tokens"):
        long, fine = translator.translate([SOURCES[4], "Das ist"], SEARCH)
    assert long[0].source_tokens == ["Der", "Hund", "schläft"]
    assert fine[0].source_tokens == ["Das", "ist"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        truncated = translator.translate("Der Hund schläft", SEARCH)
    assert [t.text for t in long] == [t.text for t in truncated]


def test_long_sentences_can_be_refused_instead(translator, monkeypatch):
    # What an exported SavedModel does with a sentence over its limit.
    monkeypatch.setattr(translator.preprocessor, "max_source_length", 3)
    monkeypatch.setattr(translator.preprocessor, "long_sources", "error")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # No truncation.
        with pytest.raises(
            ValueError,
            match=r"1 of 3 sentences have more than max_source_length=3 "
            r"tokens \(the longest has 6; sentence indices \[1\]\)\. Split",
        ):
            translator.translate(["Das ist", SOURCES[4], ""], SEARCH)
        # At the limit: translated in full, like the truncating default.
        at_limit = translator.translate("Der Hund schläft", SEARCH)[0]
    assert at_limit.source_tokens == ["Der", "Hund", "schläft"]


def test_replace_unknown_copies_the_most_attended_source_words(translator):
    bias = translator.model.output_projection.bias
    original = ops.convert_to_numpy(bias)
    # A model that says [UNK] until EOS is forced at max_length=10: any
    # other token costs ~30 nats, EOS ~60 (so no early EOS makes the beam).
    shift = np.zeros_like(original)
    shift[[UNK_ID, EOS_ID]] = 30.0, -30.0
    bias.assign(original + shift)
    try:
        sentence = "Das Haus ist rot."  # "rot" is not in the vocabulary.
        plain = translator.translate(sentence, SEARCH)[0]
        dictionary = {"Haus": "house", "rot": "red"}
        replaced = translator.translate(
            sentence,
            SEARCH,
            replace_unknown=True,
            dictionary=dictionary,
            return_attention=True,
        )[0]
    finally:
        bias.assign(original)
    assert plain.text == " ".join(["[UNK]"] * 9)
    words = [
        replaced.source_tokens[row.argmax()] for row in replaced.attention[:-1]
    ]
    expected = [dictionary.get(word, word) for word in words]
    assert replaced.target_tokens == [*expected, "[EOS]"]
    assert replaced.text.replace(" ", "") == "".join(expected)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(sentences=[1]), "element 1"),
        (dict(batch_size=0), "batch_size=0"),
        (dict(search=dict(max_length=0)), "max_length=0"),
        (dict(search=dict(beam_size=2, n_best=3)), "n_best=3"),
        (dict(search=dict(length_penalty=-1.0)), "length_penalty=-1.0"),
    ],
)
def test_bad_arguments_raise_clear_errors(translator, kwargs, message):
    kwargs = {"sentences": ["Das ist gut."], **kwargs}
    with pytest.raises(ValueError, match=message):
        # Search options are checked by SearchConfig, before any search.
        if "search" in kwargs:
            kwargs["search"] = SearchConfig(**kwargs["search"])
        translator.translate(**kwargs)


def test_search_must_be_a_search_config(translator):
    with pytest.raises(ValueError, match="search={'beam_size': 2}"):
        translator.translate("Das ist gut.", {"beam_size": 2})


def test_bad_constructor_arguments_raise_clear_errors(translator):
    model, preprocessor = translator.model, translator.preprocessor
    source, target = preprocessor.tokenizers
    with pytest.raises(ValueError, match="bucket_width=0"):
        Translator(model, preprocessor, bucket_width=0)
    with pytest.raises(ValueError, match="source tokenizer has"):
        Translator(model, TranslationPreprocessor(target, source))
    with pytest.raises(TypeError, match="Received: WordTokenizer"):
        Translator(model, source)
    with pytest.raises(ValueError, match="search={'beam_size': 2}"):
        Translator(model, preprocessor, search={"beam_size": 2})


def test_a_loaded_translator_trains_on(run_dir):
    """`fit` lowers the loss of the pairs it trains on, computed apart."""
    translator = Translator.from_preset(run_dir)
    pairs = PAIRS[:4]
    x, y = translator.preprocessor(*map(list, zip(*pairs, strict=True)))

    def loss():
        # Mean cross-entropy of the real (non-padding) labels.
        logits = ops.convert_to_numpy(translator.model(x, training=False))
        labels = ops.convert_to_numpy(y)
        logits = logits - logits.max(-1, keepdims=True)
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        picked = np.take_along_axis(log_probs, labels[..., None], -1)[..., 0]
        return -picked[labels != 0].mean()

    before = loss()
    # Adam at 1e-3 (the default compile): slowly, but every step.
    history = translator.fit(pairs, batch_size=4, epochs=10, verbose=0)
    assert len(history.history["loss"]) == 10
    assert loss() < before - 0.02


def test_replace_unknown_words():
    attention = np.array(
        [[0.7, 0.2, 0.1, 0.0], [0.1, 0.1, 0.8, 0.0], [0.0, 0.9, 0.1, 0.0]]
    )  # One padding column.
    source = ["the", "cat", "Zurich"]
    assert replace_unknown_words(
        ["le", "[UNK]", "[UNK]"], source, attention
    ) == ["le", "Zurich", "cat"]
    assert replace_unknown_words(
        ["le", "[UNK]", "<unk>"],
        source,
        attention,
        dictionary={"Zurich": "Zurich-FR", "the": "le"},
        unk="<unk>",
    ) == ["le", "[UNK]", "cat"]
    assert replace_unknown_words(
        ["[UNK]"], source, attention, dictionary={"the": "le"}
    ) == ["le"]
    assert replace_unknown_words(["a", "b"], source, attention) == ["a", "b"]
    result = replace_unknown_words(["le", "[UNK]"], source, attention)
    assert result == ["le", "Zurich"]


def test_replace_unknown_words_checks_the_attention_shape():
    with pytest.raises(ValueError, match=r"attention.shape=\(2, 2\)"):
        replace_unknown_words(["[UNK]"], ["a", "b", "c"], np.ones((2, 2)))
    with pytest.raises(ValueError, match=r"attention.shape=\(1, 3\)"):
        replace_unknown_words(["a", "[UNK]"], ["a", "b", "c"], np.ones((1, 3)))
