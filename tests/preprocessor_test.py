import warnings

import numpy as np
import pytest

from keras_bahdanau.data import BOS_ID
from keras_bahdanau.data import EOS_ID
from keras_bahdanau.data import PAD_ID
from keras_bahdanau.data import build_tokenizer
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.decoding import SearchResult
from keras_bahdanau.preprocessor import TranslationPreprocessor
from keras_bahdanau.translator import Translator
from tests.run_fixture import PAIRS


@pytest.fixture(scope="module")
def preprocessor():
    source = build_tokenizer("word", [s for s, _ in PAIRS], 100)
    target = build_tokenizer("word", [t for _, t in PAIRS], 100)
    return TranslationPreprocessor(source, target, max_source_length=4)


def _strings(tensor):
    return [value.decode("utf-8") for value in np.ravel(tensor.numpy())]


def test_read_sources_gives_ids_tokens_and_each_sentence_status(preprocessor):
    text = ["Das Haus ist klein.", "", "  ", "Der Hund schläft im Haus."]
    sources = preprocessor.read_sources(text)
    source = preprocessor.source_tokenizer
    assert sources["ids"].to_list() == source.tokenize(text).to_list()
    assert sources["tokens"].to_list()[0] == [
        b"Das",
        b"Haus",
        b"ist",
        b"klein",
        b".",
    ]
    assert sources["length"].numpy().tolist() == [5, 0, 0, 6]
    # Above max_source_length=4, nothing is cut: the status says it.
    assert _strings(sources["status"]) == [
        "too_long",
        "empty",
        "empty",
        "too_long",
    ]
    unlimited = TranslationPreprocessor(*preprocessor.tokenizers)
    unlimited = unlimited.read_sources(text)
    assert _strings(unlimited["status"]) == ["ok", "empty", "empty", "ok"]


def test_read_sources_replaces_invalid_utf8(preprocessor):
    # A byte string that is not UTF-8 (a server receives bytes).
    sources = preprocessor.read_sources(np.array([b"Das \xff Haus"]))
    assert sources["tokens"].to_list() == [[b"Das", "\ufffd".encode(), b"Haus"]]
    assert _strings(sources["status"]) == ["ok"]


def test_tokenize_sources_truncates_with_a_warning_or_refuses(preprocessor):
    sentences = ["Das ist gut.", "Der Hund schläft im Haus."]
    with pytest.warns(UserWarning, match=r"1 of 2 sentences .*=4 tokens"):
        ids, tokens = preprocessor.tokenize_sources(sentences)
    assert tokens == [
        ["Das", "ist", "gut", "."],
        ["Der", "Hund", "schläft", "im"],
    ]
    expected = preprocessor.source_tokenizer.tokenize(sentences).to_list()
    assert [row.tolist() for row in ids] == [expected[0], expected[1][:4]]
    assert all(row.dtype == np.int32 for row in ids)
    strict = TranslationPreprocessor(
        *preprocessor.tokenizers, max_source_length=4, long_sources="error"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        with pytest.raises(ValueError, match=r"indices \[1\]\)\. Split"):
            strict.tokenize_sources(sentences)
        assert strict.tokenize_sources(sentences[:1])[1] == tokens[:1]


def test_decode_hypotheses_texts_and_unsearched_rows(preprocessor):
    target = preprocessor.target_tokenizer
    words = target.tokenize(["The house is small.", "The dog"]).to_list()
    first = [*words[0], EOS_ID]  # 6 tokens with EOS
    second = [*words[1], EOS_ID, PAD_ID, PAD_ID, PAD_ID]
    # Row 0: two hypotheses and an empty slot; row 1: not searched.
    token_ids = np.array(
        [[first, second, [PAD_ID] * 6], [first, first, first]], "int32"
    )
    result = SearchResult(
        token_ids=token_ids,
        scores=np.array([[-1.0, -2.0, -np.inf], [-1.0, -1.0, -1.0]], "float32"),
        log_probs=np.array(
            [[-1.5, -2.5, -np.inf], [-1.0, -1.0, -1.0]], "float32"
        ),
        lengths=np.array([[6, 3, 0], [6, 6, 6]], "int32"),
        attention=np.zeros((2, 3, 6, 4), "float32"),
    )
    decoded = preprocessor.decode_hypotheses(result, [True, False])
    assert _strings(decoded["text"]) == [
        "The house is small.",
        "The dog",
        "",
        "",
        "",
        "",
    ]
    np.testing.assert_array_equal(
        decoded["score"].numpy(), [[-1, -2, -np.inf], [0, -np.inf, -np.inf]]
    )
    np.testing.assert_array_equal(
        decoded["log_prob"].numpy(),
        [[-1.5, -2.5, -np.inf], [0, -np.inf, -np.inf]],
    )
    np.testing.assert_array_equal(
        decoded["length"].numpy(), [[6, 3, 0], [0] * 3]
    )
    np.testing.assert_array_equal(
        decoded["is_hypothesis"].numpy(),
        [[True, True, False], [True, False, False]],
    )
    assert _strings(decoded["tokens"][0, 1]) == [
        "The",
        "dog",
        "[EOS]",
        "",
        "",
        "",
    ]
    two = preprocessor.decode_hypotheses(result, [True, False], n_best=2)
    assert two["text"].shape == (2, 2)


def test_make_dataset_packs_bos_and_eos(preprocessor):
    dataset, report = preprocessor.make_dataset(
        PAIRS[:3], batch_size=3, shuffle=False, bucket=False, max_length=8
    )
    assert report.num_examples == 3
    ((inputs, labels),) = [
        ((features["source_ids"], features["target_ids"]), labels)
        for features, labels in dataset
    ]
    source, target = preprocessor.tokenizers
    for row, (source_text, target_text) in enumerate(PAIRS[:3]):
        x = source.tokenize(source_text).numpy().tolist()
        y = target.tokenize(target_text).numpy().tolist()
        sources, decoder_inputs = (t.numpy()[row].tolist() for t in inputs)
        assert sources == x + [PAD_ID] * (9 - len(x))
        assert decoder_inputs == [BOS_ID, *y] + [PAD_ID] * (8 - len(y))
        assert labels.numpy()[row].tolist() == [*y, EOS_ID] + [PAD_ID] * (
            8 - len(y)
        )


def test_bad_arguments_raise_clear_errors(preprocessor, translator):
    tokenizers = preprocessor.tokenizers
    with pytest.raises(ValueError, match="max_source_length=0"):
        TranslationPreprocessor(*tokenizers, max_source_length=0)
    with pytest.raises(ValueError, match="long_sources='cut'"):
        TranslationPreprocessor(*tokenizers, long_sources="cut")
    source, target = translator.preprocessor.tokenizers
    translator.preprocessor.check_model(translator.model)  # They fit.
    with pytest.raises(ValueError, match="source tokenizer has"):
        TranslationPreprocessor(target, source).check_model(translator.model)


def test_translator_uses_the_preprocessor_it_is_given(translator):
    preprocessor = TranslationPreprocessor(
        *translator.preprocessor.tokenizers, max_source_length=3
    )
    shared = Translator(translator.model, preprocessor)
    assert shared.preprocessor is preprocessor
    assert shared.max_source_length == 3
    search = SearchConfig(beam_size=1, max_length=10)
    sentence = PAIRS[4][0]
    with pytest.warns(UserWarning, match="max_source_length=3"):
        cut = shared.translate(sentence, search)
    assert cut.source_tokens == ["Der", "Hund", "schläft"]
    assert cut.text == translator.translate("Der Hund schläft", search).text
