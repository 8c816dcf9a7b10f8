import numpy as np
import pytest
import tensorflow as tf

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


def test_generate_preprocess_gives_ids_tokens_and_each_sentence_status(
    preprocessor,
):
    text = ["Das Haus ist klein.", "", "  ", "Der Hund schläft im Haus."]
    sources = preprocessor.generate_preprocess(text)
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
    unlimited = unlimited.generate_preprocess(text)
    assert _strings(unlimited["status"]) == ["ok", "empty", "empty", "ok"]


def test_generate_preprocess_replaces_invalid_utf8(preprocessor):
    # A byte string that is not UTF-8 (a server receives bytes).
    sources = preprocessor.generate_preprocess(np.array([b"Das \xff Haus"]))
    assert sources["tokens"].to_list() == [[b"Das", "\ufffd".encode(), b"Haus"]]
    assert _strings(sources["status"]) == ["ok"]


def test_generate_postprocess_texts_and_unsearched_rows(preprocessor):
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
    decoded = preprocessor.generate_postprocess(result, [True, False])
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
    two = preprocessor.generate_postprocess(result, [True, False], n_best=2)
    assert two["text"].shape == (2, 2)


def test_a_call_packs_pairs_for_fit(preprocessor):
    """`[BOS] y` and `y [EOS]`, padded: from the tokenizers' own ids."""
    source, target = preprocessor.tokenizers
    pairs = [*PAIRS[:3], ("Das ist gut.", "")]
    x, y = preprocessor(*map(list, zip(*pairs, strict=True)))
    for row, (source_text, target_text) in enumerate(pairs):
        ids = source.tokenize(source_text).numpy().tolist()
        words = target.tokenize(target_text).numpy().tolist()
        width = 1 + max(len(target.tokenize(t).numpy()) for _, t in pairs)
        padding = [PAD_ID] * (width - 1 - len(words))
        assert x["source_ids"].numpy()[row, : len(ids)].tolist() == ids
        assert x["target_ids"].numpy()[row].tolist() == [
            BOS_ID,
            *words,
            *padding,
        ]
        assert y.numpy()[row].tolist() == [*words, EOS_ID, *padding]
    # One pair: no batch axis.
    one_x, one_y = preprocessor(*pairs[0])
    assert one_y.numpy().tolist() == y.numpy()[0, : len(one_y)].tolist()
    assert one_x["source_ids"].shape.rank == 1


def test_a_call_maps_a_tf_data_pipeline(preprocessor):
    sources, targets = map(list, zip(*PAIRS[:4], strict=True))
    pairs = tf.data.Dataset.from_tensor_slices((sources, targets))
    (batched,) = list(pairs.batch(4).map(preprocessor))
    unbatched = list(pairs.map(preprocessor))
    x, y = preprocessor(sources, targets)
    for name in ("source_ids", "target_ids"):
        np.testing.assert_array_equal(batched[0][name], x[name])
        for row, (features, _) in enumerate(unbatched):
            width = features[name].shape[0]
            np.testing.assert_array_equal(
                features[name], x[name].numpy()[row, :width]
            )
    np.testing.assert_array_equal(batched[1], y)


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
    # The packing of a call, padded to the bucket's width.
    x, y = preprocessor(*map(list, zip(*PAIRS[:3], strict=True)))
    np.testing.assert_array_equal(labels[:, : y.shape[1]], y)
    np.testing.assert_array_equal(inputs[1][:, : y.shape[1]], x["target_ids"])


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
