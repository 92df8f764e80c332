"""Shared test helpers: a tiny seeded Transformer, built on demand; the toy corpus and file helpers;
the command line run as a subprocess, one toy model trained through it for the whole session, and
``seq2seq serve`` run as a process on a free loopback port."""

import contextlib
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from hypothesis import settings
from torch import Tensor, nn

import seq2seq.model.kernels
from seq2seq.config import ModelConfig
from seq2seq.data.corpus import normalize, read_pair_files
from seq2seq.decode.translator import PLAIN, Hypothesis, SearchOptions, Translator
from seq2seq.model.layers import DecoderCache
from seq2seq.model.transformer import Transformer
from seq2seq.special import BOS as START
from seq2seq.special import EOS as END
from seq2seq.special import PAD, UNK

__all__ = ["PAD", "UNK", "START", "END"]  # re-exported: the tests name the special ids as the model sees them
VOCAB = 40

# Tiny tensors gain nothing from intra-op threads, and on a shared machine OpenMP threads
# spin-waiting against another busy process slow the tests down many times over.
torch.set_num_threads(1)


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_mib(pid: int) -> float:
    """A process's resident set (VmRSS) in MiB, from Linux's /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise ValueError(f"no VmRSS for pid {pid}")


class Tensorless(Translator):
    """An engine that is not ours: no tensors to explain, and a search that finds nothing.
    Built with ``Tensorless.__new__(Tensorless)``: the refusals under test come before any model."""

    engine = "other"

    def search(
        self, sources: list[list[int]], beam: int, nbest: int, options: SearchOptions = PLAIN
    ) -> list[list[Hypothesis]]:
        return [[] for _ in sources]


def build_tiny_model(seed: int = 0, src_vocab: int = VOCAB, tgt_vocab: int = VOCAB, **overrides) -> Transformer:
    """A 2+2-layer, d_model=32 Transformer in eval mode, initialised from ``seed``.

    ``overrides`` replace ModelConfig fields (e.g. ``norm="pre"``, ``attention="explicit"``).
    """
    settings = {"d_model": 32, "heads": 4, "ffn_dim": 64, "encoder_layers": 2, "decoder_layers": 2, "dropout": 0.0}
    settings.update(overrides)
    torch.manual_seed(seed)
    return Transformer(ModelConfig(**settings), src_vocab=src_vocab, tgt_vocab=tgt_vocab, pad_id=PAD).eval()


def unhooked(model: nn.Module) -> bool:
    """Whether no module of ``model`` holds a forward hook (a recording left none behind)."""
    return all(not m._forward_hooks for m in model.modules())


def random_batch(
    seed: int = 0, src_lengths=(5, 3, 7), tgt_lengths=(4, 6, 2), vocab: int = VOCAB
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random (src, tgt_in) with right padding; sources end with <end>, targets start with <start>."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.full((len(src_lengths), max(src_lengths)), PAD)
    tgt = torch.full((len(tgt_lengths), max(tgt_lengths)), PAD)
    for row, (s, t) in enumerate(zip(src_lengths, tgt_lengths, strict=True)):
        src[row, : s - 1] = torch.randint(4, vocab, (s - 1,), generator=gen)
        src[row, s - 1] = END
        tgt[row, 0] = START
        tgt[row, 1:t] = torch.randint(4, vocab, (t - 1,), generator=gen)
    return src, tgt


@pytest.fixture
def tiny_model() -> Callable[..., Transformer]:
    """Factory fixture: ``tiny_model(**overrides)`` -> a seeded tiny Transformer in eval mode."""
    return build_tiny_model


# Property-based tests: the same examples on every run (derandomized, no example database), so CI is
# reproducible and a failure seen once is seen again; no per-example deadline on a shared, busy machine.
FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=100, print_blob=False)


# --- Data pipeline helpers -------------------------------------------------------------------

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TOY_SRC, TOY_TGT = FIXTURES / "toy.zh", FIXTURES / "toy.en"  # 2000 line-aligned Tatoeba pairs


# --- Decoders with known behaviour, for the search tests ---------------------------------------

A, B, C = 4, 5, 6  # the scripted decoder's vocabulary: 7 ids
SCRIPT_VOCAB = 7


class EosRamp(nn.Module):
    """A tiny model whose <end> logit grows with the target length.

    A random model almost never prefers <end>, so every search would just run to
    the length limit; the ramp makes sentences end at different steps, so the
    searches below also exercise finishing, filler rows and beam reordering.
    """

    def __init__(self, inner: nn.Module, slope: float = 0.5, offset: float = -3.0) -> None:
        super().__init__()
        self.inner, self.cfg, self.slope, self.offset = inner, inner.cfg, slope, offset
        self.length = 0

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        return self.inner.encode(src, src_mask)

    def decode(self, tgt: Tensor, memory: Tensor, src_mask: Tensor, cache: DecoderCache | None = None) -> Tensor:
        self.length = (cache.length if cache is not None else 0) + tgt.size(1)
        return self.inner.decode(tgt, memory, src_mask, cache)

    def logits(self, states: Tensor) -> Tensor:
        out = self.inner.logits(states).clone()
        out[..., END] += self.slope * self.length + self.offset
        return out


def sources(n: int, seed: int = 0, min_len: int = 2, max_len: int = 12, vocab: int = 40) -> Tensor:
    """(n, max_len) random right-padded sources ``x… <end>`` of mixed lengths."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(min_len, max_len + 1, (n,), generator=gen).tolist()
    src = torch.full((n, max(lengths)), PAD)
    for row, length in enumerate(lengths):
        src[row, : length - 1] = torch.randint(4, vocab, (length - 1,), generator=gen)
        src[row, length - 1] = END
    return src


def mixed_lengths(lengths: list[int], vocab: int = 40) -> Tensor:
    """Right-padded sources (B, max length) of the given lengths, ids drawn from a seeded generator."""
    generator = torch.Generator().manual_seed(0)
    src = torch.full((len(lengths), max(lengths)), PAD)
    for row, length in enumerate(lengths):
        src[row, :length] = torch.randint(4, vocab, (length,), generator=generator)
    return src


def unpad(src: Tensor, row: int) -> Tensor:
    """Row ``row`` of ``src`` alone, without its padding: (1, S_row)."""
    length = int((src[row] != PAD).sum())
    return src[row : row + 1, :length]


class PositionRamp(nn.Module):
    """A tiny model whose <end> logit grows with the position, whole targets or one step at a time,
    so outputs end at different lengths (with <end>) and teacher forcing sees the same logits;
    like a trained model, it never predicts <pad> or <start>."""

    def __init__(self, inner: nn.Module, slope: float = 0.5, offset: float = -3.0) -> None:
        super().__init__()
        self.inner, self.cfg, self.slope, self.offset = inner, inner.cfg, slope, offset
        self.first = 0

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        return self.inner.encode(src, src_mask)

    def decode(self, tgt: Tensor, memory: Tensor, src_mask: Tensor, cache: DecoderCache | None = None) -> Tensor:
        self.first = cache.length if cache is not None else 0
        return self.inner.decode(tgt, memory, src_mask, cache)

    def logits(self, states: Tensor) -> Tensor:
        out = self.inner.logits(states).clone()
        if states.dim() == 2:  # the searches ask for the last position only
            positions = torch.tensor(float(self.first + 1))
        else:  # (B, T, D): every position
            positions = self.first + torch.arange(1, states.size(1) + 1, dtype=torch.float)[None, :]
        out[..., END] += self.slope * positions + self.offset
        out[..., [PAD, START]] = float("-inf")  # like a trained model: no output is <pad> or <start>
        return out


class ScriptedModel(nn.Module):
    """Next-token probabilities set by hand as a function of (script, prefix).

    The source's first id picks a script (a dict: prefix tuple -> {token: p});
    prefixes not in the script get ``default``. ``decode`` hands every position the
    source id and the whole prefix, so run it with ``use_cache=False``.
    Tokens without a probability get log 0 = -inf.
    """

    def __init__(
        self,
        scripts: dict[int, dict[tuple[int, ...], dict[int, float]]],
        default: dict[int, float] | None = None,
        vocab: int = SCRIPT_VOCAB,
    ) -> None:
        super().__init__()
        self.cfg = SimpleNamespace(max_positions=64, decoder_start_id=START)
        self.scripts, self.vocab = scripts, vocab
        self.default = default or {END: 0.97, A: 0.01, B: 0.01, C: 0.01}
        self.prefixes: list[tuple[int, ...]] = []  # every prefix asked about, for inspection

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        return src.float()[:, :, None]  # (B, S, 1): carries the script id to decode

    def decode(self, tgt: Tensor, memory: Tensor, src_mask: Tensor, cache: DecoderCache | None = None) -> Tensor:
        assert cache is None, "the scripted model needs the whole prefix: use_cache=False"
        b, t = tgt.shape
        memory = memory.repeat_interleave(b // memory.size(0), dim=0)  # a sentence's beams share its row
        row = torch.cat([memory[:, 0, :], tgt.float()], dim=1)  # (B, 1+T): script id, prefix
        return row[:, None, :].expand(b, t, t + 1)  # (B, T, 1+T): every position sees it all

    def logits(self, states: Tensor) -> Tensor:
        out = torch.full((states.size(0), self.vocab), float("-inf"))
        for i, row in enumerate(states.long().tolist()):
            script, prefix = row[0], tuple(row[1:])
            assert prefix[0] == START
            self.prefixes.append(prefix[1:])
            probs = self.scripts.get(script, {}).get(prefix[1:], self.default)
            for token, p in probs.items():
                out[i, token] = math.log(p)
        return out


@contextlib.contextmanager
def recorded_logits(model: Transformer) -> Iterator[list[Tensor]]:
    """The logits ``model.out_proj`` gives while the block runs, in call order and its dtype (a forward hook)."""
    seen: list[Tensor] = []
    handle = model.out_proj.register_forward_hook(lambda module, args, out: seen.append(out.detach()))
    try:
        yield seen
    finally:
        handle.remove()


def greedy_score(token_log_probs: list[float], tokens: int, limit: int) -> float:
    """The score greedy search gives its output of ``tokens`` ids, from that output's forced log-probabilities
    (its <end>'s last): with <end>'s when greedy chose <end> (fewer ids than the length ``limit``), without when
    the limit stopped it."""
    return sum(token_log_probs[: tokens + 1 if tokens < limit else tokens])


def attention_as_without_amx(monkeypatch: pytest.MonkeyPatch) -> None:
    """Attention picks its kernels as on a CPU without AMX: bf16 decoding steps take the explicit path too."""
    monkeypatch.setattr(seq2seq.model.kernels, "cpu_has_amx", lambda: False)


def gnmt(length: int, alpha: float) -> float:
    return ((5 + length) / 6) ** alpha


# Script 1: greedy takes A (0.6) and then <end> (0.4): p = 0.24. Beam keeps B
# (0.4) too, which ends with 0.9: p = 0.36, better than the greedy path.
GREEDY_TRAP = {
    (): {A: 0.6, B: 0.4},
    (A,): {A: 0.35, C: 0.25, END: 0.4},
    (B,): {END: 0.9, A: 0.05, C: 0.05},
}


def script_src(*scripts: int) -> Tensor:
    """One source per script id: ``[script, <end>]`` (the script id is the first token)."""
    return torch.tensor([[s, END] for s in scripts])


def write_lines(path: Path, lines: list[str]) -> Path:
    """Write ``lines`` as a UTF-8 file, one per line; returns ``path``."""
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def toy_pairs() -> tuple[list[str], list[str]]:
    """The toy fixture corpus as (sources, targets), normalized."""
    src, tgt = read_pair_files(str(TOY_SRC), str(TOY_TGT))
    return [normalize(s) for s in src], [normalize(t) for t in tgt]


# --- The command line -------------------------------------------------------------------------

REPO = Path(__file__).resolve().parent.parent
TOY = "seq2seq/recipes/toy.yaml"  # the toy recipe, relative to REPO like the corpus paths inside it
# One thread per subprocess: on a shared 2-core machine OpenMP threads spinning against each other cost more
# than they give on toy sizes.
CLI_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def run_cli(*args: str, stdin: str = "", cwd: Path = REPO, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m seq2seq ARGS`` in ``cwd``; never raises on a non-zero exit status."""
    return subprocess.run(
        [sys.executable, "-m", "seq2seq", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=CLI_ENV,
        timeout=timeout,
        check=False,
    )


# --standalone: a rendezvous on a free local port, so concurrent jobs on one machine do not collide.
ONE_MACHINE = ("--standalone", "--nproc-per-node", "2")


def torchrun(*args: str, launcher: tuple[str, ...] = ONE_MACHINE) -> list[str]:
    """The command line of ``torchrun LAUNCHER -m seq2seq ARGS`` with this interpreter."""
    return [sys.executable, "-m", "torch.distributed.run", *launcher, "-m", "seq2seq", *args]


def run_torchrun(*args: str, launcher: tuple[str, ...] = ONE_MACHINE) -> subprocess.CompletedProcess:
    """``torchrun LAUNCHER -m seq2seq ARGS`` in the repository; never raises on a non-zero exit status."""
    return subprocess.run(
        torchrun(*args, launcher=launcher), capture_output=True, text=True, cwd=REPO, env=CLI_ENV, timeout=240
    )


def sets(*pairs: str) -> list[str]:
    """``sets("a.b=1", "c.d=2")`` -> ``["--set", "a.b=1", "--set", "c.d=2"]``."""
    return [arg for pair in pairs for arg in ("--set", pair)]


def toy_train_args(run_dir: Path, cache: Path, *overrides: str) -> list[str]:
    """The arguments of ``seq2seq train`` on the toy config on one CPU thread, into ``run_dir`` with data ``cache``."""
    settings = (f"train.run_dir={run_dir}", f"data.cache_dir={cache}", "train.threads=1", *overrides)
    return ["train", "--config", TOY, "--device", "cpu", *sets(*settings)]


def one_line_error(result: subprocess.CompletedProcess) -> str:
    """Assert exit status 2 with a single ``seq2seq: error:`` line on stderr and no stdout; return that line."""
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("seq2seq: error:") and "Traceback" not in result.stderr
    assert result.stdout == ""
    return lines[0]


def main_error(capsys: pytest.CaptureFixture, *args: str) -> str:
    """``seq2seq.cli.main(ARGS)`` in this process (no interpreter start): assert it exits with status 2 and one
    ``seq2seq: error:`` line on stderr and prints nothing on stdout; return that line."""
    from seq2seq.cli import main

    capsys.readouterr()  # what earlier calls printed is not this command's
    with pytest.raises(SystemExit) as exit_:
        main(list(args))
    out, err = capsys.readouterr()
    assert exit_.value.code == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("seq2seq: error:"), err
    assert out == ""
    return err.strip()


def metrics_records(run_dir: Path) -> list[dict]:
    """The records of a run's metrics.jsonl, in order."""
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="session")
def toy_cache(tmp_path_factory) -> Path:
    """One data cache for the session: the toy tokenizer and encoding are built once."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="session")
def toy_run(tmp_path_factory, toy_cache) -> Path:
    """A toy model trained for 60 steps through ``python -m seq2seq train``; shared, read-only, by the
    end-to-end tests (copy it before changing anything in it).

    60 steps, not fewer: after 30 the toy model still answers every sentence with <end> at once,
    and empty translations would make output-alignment checks vacuous.
    """
    run = tmp_path_factory.mktemp("toy_run") / "run"
    settings = ("train.max_steps=60", "train.eval_every=60", "train.eval_sentences=5")
    result = run_cli(*toy_train_args(run, toy_cache, *settings), timeout=600)  # minutes on a busy machine
    assert result.returncode == 0, result.stderr
    assert "best.pt" in result.stdout
    return run


# --- A server as a real process ----------------------------------------------------------------


def http_json(url: str, body: dict | None = None, timeout: float = 60) -> tuple[int, dict]:
    """GET (or POST ``body`` as JSON to) ``url``; returns (status, decoded JSON body)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@contextlib.contextmanager
def serve_process(model: Path, *flags: str) -> Iterator[tuple[subprocess.Popen, str]]:
    """``python -m seq2seq serve`` on a free loopback port; yields (process, base URL) once /health answers.

    The process is killed on the way out if the test did not stop it.
    """
    port = free_port()
    args = [sys.executable, "-m", "seq2seq", "serve", "--model", str(model), "--device", "cpu", "--port", str(port)]
    process = subprocess.Popen(
        [*args, *flags], cwd=REPO, env=CLI_ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, process.stdout.read()
            assert time.monotonic() < deadline, "the server did not answer /health"
            try:
                if http_json(f"{url}/health", timeout=2)[0] == 200:
                    break
            except OSError:
                time.sleep(0.2)
        yield process, url
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
        process.stdout.close()


# --- A MarianMT model as transformers saves it (the hf extra) -----------------------------------

MARIAN_SPM_SIZES = {"source.spm": 1200, "target.spm": 400}  # pieces per side: the toy Chinese has ~1050 characters


def _marian_spm(lines: list[str], vocab_size: int) -> bytes:
    """A SentencePiece model with SentencePiece's own special ids (<unk> 0, <s> 1, </s> 2), as OPUS-MT's are."""
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=vocab_size,
        hard_vocab_limit=False,
        num_threads=1,
        minloglevel=2,
    )
    return model.getvalue()


@pytest.fixture(scope="session")
def marian_dir(tmp_path_factory, toy_pairs) -> Path:
    """A small MarianMT model with seeded random weights, saved by ``save_pretrained`` as a download looks.

    Laid out as OPUS-MT models are: SentencePiece models per side (trained on the toy corpus), one
    vocab.json with </s> 0, <unk> 1, the pieces of both sides, <pad> last; the decoder starts from
    <pad>; SiLU ("swish"); a non-zero final_logits_bias, high for </s>. The weights are drawn wide (std 0.3),
    so the logits of different tokens are far apart and a greedy search does not hinge on rounding.
    """
    import sentencepiece as spm
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    out = tmp_path_factory.mktemp("marian") / "opus-mt-toy"
    spm_dir = tmp_path_factory.mktemp("marian_spm")
    sides = {"source.spm": toy_pairs[0], "target.spm": toy_pairs[1]}
    pieces: list[str] = []
    for name, lines in sides.items():
        model = _marian_spm(lines, MARIAN_SPM_SIZES[name])
        (spm_dir / name).write_bytes(model)
        processor = spm.SentencePieceProcessor(model_proto=model)
        for i in range(processor.get_piece_size()):
            if not (processor.is_control(i) or processor.is_unknown(i)) and processor.id_to_piece(i) not in pieces:
                pieces.append(processor.id_to_piece(i))
    vocab = {"</s>": 0, "<unk>": 1, **{piece: i + 2 for i, piece in enumerate(pieces)}}
    vocab["<pad>"] = pad = len(vocab)
    (spm_dir / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    config = MarianConfig(
        vocab_size=len(vocab),
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        activation_function="swish",
        max_position_embeddings=128,
        scale_embedding=True,
        pad_token_id=pad,
        eos_token_id=0,
        bos_token_id=0,  # as OPUS-MT's config.json has it: no <start> of its own
        decoder_start_token_id=pad,
        forced_eos_token_id=None,  # plain greedy search, as ours
    )
    model = MarianMTModel(config).eval()
    draws = torch.Generator().manual_seed(0)  # by sorted name: the same weights whatever order transformers builds
    with torch.no_grad():
        for name, tensor in sorted(model.state_dict().items()):
            if "embed_positions" in name:
                continue
            mean, std = (1.0, 0.1) if name.endswith("layer_norm.weight") else (0.0, 0.3)
            tensor.copy_(torch.randn(tensor.shape, generator=draws) * std + mean)
        model.final_logits_bias[0, 0] = 8.0  # </s> wins at once for some sources, never for others
    model.save_pretrained(str(out))
    MarianTokenizer(
        str(spm_dir / "source.spm"), str(spm_dir / "target.spm"), str(spm_dir / "vocab.json")
    ).save_pretrained(str(out))
    return out


# --- A real browser ------------------------------------------------------------------------------

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium through Debian's chromedriver; CI installs both (.ci/run), so there a missing one fails."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if shutil.which(path) is None]
    if missing:
        message = f"{' and '.join(missing)} not installed (Debian: apt-get install chromium chromium-driver)"
        pytest.fail(message) if os.environ.get("CI") == "true" else pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


class LoopbackFiles:
    """Byte strings served by path over HTTP on 127.0.0.1 from a thread, with the faults a test sets.

    ``drop_after[path] = n``: the first request for ``path`` gets all headers (the full length) but only
    ``n`` bytes, then the connection closes. ``ignore_range``: Range headers are answered with the whole
    file (200). ``stall_after[path] = n``: a request sends ``n`` bytes, sets ``stalled`` and waits for
    ``release``. ``requests`` records (path, Range header) of every request.
    """

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: list[tuple[str, str | None]] = []
        self.drop_after: dict[str, int] = {}
        self.stall_after: dict[str, int] = {}
        self.ignore_range = False
        self.stalled, self.release = threading.Event(), threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the http.server API)
                outer._answer(self)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        path, requested = handler.path, handler.headers.get("Range")
        first = all(seen != path for seen, _ in self.requests)
        self.requests.append((path, requested))
        body = self.files.get(path)
        if body is None:
            handler.send_error(404)
            return
        start = int(requested.removeprefix("bytes=").rstrip("-")) if requested and not self.ignore_range else 0
        handler.send_response(206 if start else 200)
        if start:
            handler.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        handler.send_header("Content-Length", str(len(body) - start))
        handler.end_headers()
        rest = body[start:]
        if path in self.stall_after:
            handler.wfile.write(rest[: self.stall_after[path]])
            handler.wfile.flush()
            self.stalled.set()
            self.release.wait(timeout=60)
            handler.close_connection = True
        elif first and path in self.drop_after:
            handler.wfile.write(rest[: self.drop_after[path]])
            handler.wfile.flush()
            handler.close_connection = True
        else:
            handler.wfile.write(rest)


@pytest.fixture
def loopback() -> Iterator[LoopbackFiles]:
    server = LoopbackFiles()
    server.thread.start()
    yield server
    server.release.set()
    server.server.shutdown()
    server.server.server_close()
