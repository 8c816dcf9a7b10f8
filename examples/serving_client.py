"""Translate with a model exported by `keras-bahdanau export` on TF Serving.

Start the server as in docs/serving.md, then:

```
python examples/serving_client.py --model demo "Das Haus ist klein."
python examples/serving_client.py --model demo --beam-size 5 --n-best 3 \\
    "Das Haus ist klein."
python examples/serving_client.py --model demo --grpc localhost:8500 \\
    "Das Haus ist klein."
python examples/serving_client.py --model demo --dry-run "Hallo."
```

REST needs only the standard library. gRPC needs `grpcio` and
`tensorflow-serving-api`; without the latter, `grpc_request()` still builds
a wire-compatible `PredictRequest` from TensorFlow's own protobuf classes
(enough to inspect or serialize it, not to send it).

Every sentence of a request gets its own result with a `status`: `ok`,
`empty` (no token) or `too_long` (over the model's `max_source_tokens`;
not translated, the other sentences are). `sentence_results()` turns a
response into one dict per sentence, and the command prints one JSON
line per sentence, flags each one that is not `ok` on stderr and exits
with status 2 if one is `too_long`. The server refuses a whole request
only over its request limits (sentences per request, a bad `beam_size`;
see docs/serving.md): `send_rest()` and `send_grpc()` then raise
`ServingError` with the server's message, e.g. "At most 64 sentences
per request (max_batch) ...", and the command exits with status 1.
"""

import argparse
import base64
import json
import sys
import urllib.error
import urllib.request

# The exported signatures and their inputs (see keras_bahdanau/export.py).
SIGNATURE_INPUTS = {
    "serving_default": ("text",),
    "translate_n_best": ("text", "beam_size", "n_best", "length_penalty"),
    "align": ("text",),
}
N_BEST_DTYPES = {"beam_size": "int32", "n_best": "int32"}
# What the `status` output of a sentence that was not translated means.
STATUS_NOTES = {
    "empty": "nothing to translate (no token)",
    "too_long": "not translated: more tokens than the model's "
    "max_source_tokens; split or shorten it",
}
# Exit status of the command when a sentence is `too_long` (1: refused).
EXIT_NOT_TRANSLATED = 2


def rest_request(
    texts,
    signature_name="serving_default",
    beam_size=None,
    n_best=None,
    length_penalty=None,
):
    """The JSON body of a REST `:predict` request.

    `serving_default` and `align` use the row ("instances") format, one
    object per sentence. `translate_n_best` has scalar inputs, which the
    row format cannot carry (every input of a row needs the batch
    dimension), so it uses the columnar ("inputs") format.

    Args:
        texts: list of str or bytes (bytes are sent base64-encoded).
        signature_name: one of `SIGNATURE_INPUTS`.
        beam_size, n_best, length_penalty: for `translate_n_best` only.

    Returns:
        A dict, ready for `json.dumps()`.
    """
    # Bytes (e.g. not valid UTF-8) travel base64-encoded, as TF Serving's
    # REST API reads {"b64": ...} for string tensors.
    texts = [
        {"b64": base64.b64encode(t).decode("ascii")}
        if isinstance(t, bytes)
        else t
        for t in _check_texts(texts)
    ]
    scalars = _scalars(signature_name, beam_size, n_best, length_penalty)
    if signature_name == "translate_n_best":
        return {
            "signature_name": signature_name,
            "inputs": {"text": texts, **scalars},
        }
    return {
        "signature_name": signature_name,
        "instances": [{"text": text} for text in texts],
    }


def grpc_request(
    texts,
    model_name,
    signature_name="serving_default",
    version=None,
    beam_size=None,
    n_best=None,
    length_penalty=None,
):
    """A `tensorflow.serving.PredictRequest` for one of the signatures.

    Args:
        texts: list of str or bytes (bytes go as they are, e.g. to test
            invalid UTF-8).
        model_name: the served model's name (`MODEL_NAME`).
        signature_name: one of `SIGNATURE_INPUTS`.
        version: optional int, a model version; None for the latest.
        beam_size, n_best, length_penalty: for `translate_n_best` only.

    Returns:
        A `PredictRequest` message.
    """
    import numpy as np
    import tensorflow as tf

    texts = _check_texts(texts)
    scalars = _scalars(signature_name, beam_size, n_best, length_penalty)
    request = predict_request_class()()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature_name
    if version is not None:
        request.model_spec.version.value = version
    text = np.array(
        [t.encode("utf-8") if isinstance(t, str) else t for t in texts],
        dtype=object,
    )
    tensors = {"text": tf.make_tensor_proto(text, tf.string)}
    for name, value in scalars.items():
        dtype = N_BEST_DTYPES.get(name, "float32")
        tensors[name] = tf.make_tensor_proto(np.array(value, dtype))
    for name, tensor in tensors.items():
        # By bytes, not CopyFrom(): the fallback class has its own
        # TensorProto class (same wire format).
        request.inputs[name].ParseFromString(tensor.SerializeToString())
    return request


def predict_request_class():
    """`PredictRequest` of tensorflow-serving-api, or an equivalent one.

    Without tensorflow-serving-api, the message is built from a descriptor
    with the same package, names and field numbers as
    `tensorflow_serving/apis/predict.proto` and `model.proto`, on top of
    TensorFlow's `TensorProto`: it serializes to the same bytes.
    """
    try:
        from tensorflow_serving.apis import predict_pb2
    except ImportError:
        return _fallback_predict_request_class()
    return predict_pb2.PredictRequest


def _fallback_predict_request_class():
    from google.protobuf import descriptor_pb2
    from google.protobuf import descriptor_pool
    from google.protobuf import message_factory
    from google.protobuf import wrappers_pb2
    from tensorflow.core.framework import tensor_pb2

    # A private pool, so that a later import of tensorflow_serving cannot
    # clash with these definitions.
    pool = descriptor_pool.DescriptorPool()
    added = set()

    def add(file_descriptor):
        for dependency in file_descriptor.dependencies:
            add(dependency)
        if file_descriptor.name not in added:
            pool.AddSerializedFile(file_descriptor.serialized_pb)
            added.add(file_descriptor.name)

    add(wrappers_pb2.DESCRIPTOR)
    add(tensor_pb2.DESCRIPTOR)
    F = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(
        name="tensorflow_serving/apis/predict.proto",
        package="tensorflow.serving",
        syntax="proto3",
        dependency=[
            tensor_pb2.DESCRIPTOR.name,
            wrappers_pb2.DESCRIPTOR.name,
        ],
    )
    model_spec = proto.message_type.add(name="ModelSpec")
    model_spec.field.add(
        name="name", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL
    )
    model_spec.field.add(
        name="version",
        number=2,
        type=F.TYPE_MESSAGE,
        label=F.LABEL_OPTIONAL,
        type_name=".google.protobuf.Int64Value",
    )
    model_spec.field.add(
        name="signature_name",
        number=3,
        type=F.TYPE_STRING,
        label=F.LABEL_OPTIONAL,
    )
    request = proto.message_type.add(name="PredictRequest")
    entry = request.nested_type.add(name="InputsEntry")
    entry.options.map_entry = True
    entry.field.add(
        name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL
    )
    entry.field.add(
        name="value",
        number=2,
        type=F.TYPE_MESSAGE,
        label=F.LABEL_OPTIONAL,
        type_name=".tensorflow.TensorProto",
    )
    request.field.add(
        name="model_spec",
        number=1,
        type=F.TYPE_MESSAGE,
        label=F.LABEL_OPTIONAL,
        type_name=".tensorflow.serving.ModelSpec",
    )
    request.field.add(
        name="inputs",
        number=2,
        type=F.TYPE_MESSAGE,
        label=F.LABEL_REPEATED,
        type_name=".tensorflow.serving.PredictRequest.InputsEntry",
    )
    request.field.add(
        name="output_filter",
        number=3,
        type=F.TYPE_STRING,
        label=F.LABEL_REPEATED,
    )
    pool.Add(proto)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("tensorflow.serving.PredictRequest")
    )


class ServingError(RuntimeError):
    """The server refused a request; the message is the server's."""


def send_rest(url, body, timeout=60):
    """POSTs a JSON body to `url`; returns the decoded JSON response.

    Raises:
        ServingError: the server answered with an HTTP error (e.g. 400 for
            a request over a limit), with its `"error"` message.
    """
    data = json.dumps(body).encode("utf-8")
    http_request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(http_request, timeout=timeout) as response:
            return json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as error:
        text = error.read().decode("utf-8", "replace")
        try:
            message = json.loads(text)["error"]
        except (ValueError, KeyError, TypeError):
            message = text
        raise ServingError(
            f"{url} answered HTTP {error.code}: {message}"
        ) from None


def send_grpc(target, request, timeout=60):
    """Sends a `PredictRequest` to `host:port`; returns numpy outputs.

    Raises:
        ServingError: the server refused the request (e.g.
            `INVALID_ARGUMENT` for a request over a limit).
    """
    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    with grpc.insecure_channel(target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        try:
            response = stub.Predict(request, timeout=timeout)
        except grpc.RpcError as error:
            raise ServingError(
                f"{target} answered {error.code().name}: {error.details()}"
            ) from None
    return {
        name: tf.make_ndarray(tensor)
        for name, tensor in response.outputs.items()
    }


def sentence_results(response):
    """One dict of outputs per sentence, in request order.

    Every output of the signatures is batch-major, so row `i` of each
    belongs to sentence `i`; its `status` says whether it was translated.

    Args:
        response: what `send_rest()` returns (row format `predictions`
            or columnar `outputs`) or what `send_grpc()` returns (a dict
            of NumPy arrays, strings as bytes).

    Returns:
        A list of dicts, e.g. `{"translation": "...", "score": -1.9,
        "status": "ok"}`, with str for strings.
    """
    if "predictions" in response:
        return list(response["predictions"])
    columns = response.get("outputs", response)
    columns = {name: _plain(value) for name, value in columns.items()}
    return [
        dict(zip(columns, row, strict=True))
        for row in zip(*columns.values(), strict=True)
    ]


def _plain(value):
    """JSON-like values of a NumPy array (gRPC) or of JSON itself."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, bytes):  # The served strings are valid UTF-8.
        return value.decode("utf-8")
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _check_texts(texts):
    if isinstance(texts, str | bytes):
        raise ValueError(
            "`texts` must be a list of sentences, not one string. "
            f"Received: {texts!r}"
        )
    texts = list(texts)
    bad = [t for t in texts if not isinstance(t, str | bytes)]
    if bad:
        raise ValueError(
            f"Every text must be a str or bytes. Received: {bad[0]!r}"
        )
    return texts


def _scalars(signature_name, beam_size, n_best, length_penalty):
    if signature_name not in SIGNATURE_INPUTS:
        raise ValueError(
            f"Unknown signature. Received: signature_name={signature_name!r}"
            f"; expected one of {list(SIGNATURE_INPUTS)}"
        )
    values = dict(
        beam_size=beam_size, n_best=n_best, length_penalty=length_penalty
    )
    if signature_name != "translate_n_best":
        given = [name for name, value in values.items() if value is not None]
        if given:
            raise ValueError(
                f"{given} are inputs of translate_n_best only. Received: "
                f"signature_name={signature_name!r}"
            )
        return {}
    missing = [name for name, value in values.items() if value is None]
    if missing:
        raise ValueError(f"translate_n_best needs {missing}.")
    return {
        "beam_size": int(beam_size),
        "n_best": int(n_best),
        "length_penalty": float(length_penalty),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sentences", nargs="+", help="sentences to translate")
    parser.add_argument("--model", required=True, help="MODEL_NAME")
    parser.add_argument("--version", type=int, help="default: the latest")
    parser.add_argument(
        "--rest", default="http://localhost:8501", help="REST base URL"
    )
    parser.add_argument("--grpc", help="host:port: use gRPC instead of REST")
    parser.add_argument(
        "--signature",
        choices=sorted(SIGNATURE_INPUTS),
        help="default: translate_n_best with --n-best, else serving_default",
    )
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument("--n-best", type=int)
    parser.add_argument("--length-penalty", type=float, default=0.0)
    parser.add_argument(
        "--dry-run", action="store_true", help="print the request only"
    )
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except ServingError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


def _run(args):
    signature = args.signature or (
        "translate_n_best" if args.n_best else "serving_default"
    )
    options = {}
    if signature == "translate_n_best":
        options = dict(
            beam_size=args.beam_size,
            n_best=args.n_best or 1,
            length_penalty=args.length_penalty,
        )
    if args.grpc:
        request = grpc_request(
            args.sentences, args.model, signature, args.version, **options
        )
        if args.dry_run:
            print(request)
            return 0
        response = send_grpc(args.grpc, request)
    else:
        body = rest_request(args.sentences, signature, **options)
        version = f"/versions/{args.version}" if args.version else ""
        url = f"{args.rest}/v1/models/{args.model}{version}:predict"
        if args.dry_run:
            body = json.dumps(body, ensure_ascii=False, indent=2)
            print(f"POST {url}\n{body}")
            return 0
        response = send_rest(url, body)
    exit_status = 0
    results = sentence_results(response)
    for i, (sentence, result) in enumerate(
        zip(args.sentences, results, strict=True)
    ):
        print(json.dumps({"sentence": sentence, **result}, ensure_ascii=False))
        # A version exported before `status` existed refused a request
        # with a sentence it could not translate: all are translated.
        status = result.get("status", "ok")
        if status != "ok":
            note = STATUS_NOTES.get(status, "unknown status")
            print(f"sentence {i}: {status}: {note}", file=sys.stderr)
        if status == "too_long":
            exit_status = EXIT_NOT_TRANSLATED
    return exit_status


if __name__ == "__main__":
    sys.exit(main())
