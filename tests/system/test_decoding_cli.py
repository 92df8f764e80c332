"""The decoding and scoring options end to end on the shared toy run: glossary and prefixes through
``translate``, sampling with a seed, ensembles (and the tokenizer check), ``--trace``, the ``score``
verb against greedy search's own scores, and ``evaluate`` comparisons. Happy paths run
``seq2seq.cli.main`` in this process (fast); errors run the real command for its exit status."""

import json
import shutil

import pytest
import torch
from conftest import attention_as_without_amx, greedy_score, main_error, one_line_error, run_cli, write_lines

from seq2seq.cli import main
from seq2seq.config import load_config
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.decode.search import length_limits
from seq2seq.device import cpu_has_amx

SENTENCES = ["他昨天去了北京。", "我很好。", "你好。"]


def _run(capsys, *args: str) -> str:
    main(list(args))
    return capsys.readouterr().out


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def test_glossary_and_prefix(toy_run, tmp_path, capsys):
    model = ["--model", str(toy_run), "--device", "cpu", "--json"]
    plain = _json_lines(_run(capsys, "translate", *model, *SENTENCES))
    terms = write_lines(tmp_path / "terms.tsv", ["北京\tBeijing", "好\tgood"])
    glossed = _json_lines(_run(capsys, "translate", *model, "--glossary", str(terms), *SENTENCES))
    assert [r["constraints"] for r in glossed] == [["Beijing"], ["good"], ["good"]]
    for record in glossed:
        assert record["constraints"][0] in record["translation"], record
    one_term = write_lines(tmp_path / "one.tsv", ["北京\tBeijing", "上海\tShanghai"])  # matches the first only
    mixed = _json_lines(_run(capsys, "translate", *model, "--glossary", str(one_term), *SENTENCES))
    assert "Beijing" in mixed[0]["translation"]
    assert [(r["translation"], r["score"]) for r in mixed[1:]] == [(r["translation"], r["score"]) for r in plain[1:]]
    prefixed = _json_lines(_run(capsys, "translate", *model, "--prefix", "She never", *SENTENCES))
    assert all(r["translation"].startswith("She never") for r in prefixed)


def test_prefix_tsv_from_a_file(toy_run, tmp_path, capsys):
    lines = write_lines(tmp_path / "in.tsv", ["我很好。\tYou are", "你好。", "他昨天去了北京。\t"])
    args = ["translate", "--model", str(toy_run), "--device", "cpu", "--beam", "1", "--json"]
    found = _json_lines(_run(capsys, *args, "--prefix-tsv", "-i", str(lines)))
    plain = _json_lines(_run(capsys, *args, "我很好。", "你好。", "他昨天去了北京。"))
    assert found[0]["translation"].startswith("You are") and found[0]["source"] == "我很好。"
    assert [r["translation"] for r in found[1:]] == [r["translation"] for r in plain[1:]]


def test_sampling_is_reproducible_and_top_k_one_is_greedy(toy_run, capsys):
    args = ["translate", "--model", str(toy_run), "--device", "cpu", "--json", *SENTENCES]
    draw = ["--sample", "--nbest", "4", "--temperature", "1.5"]
    first = _json_lines(_run(capsys, *args, *draw, "--seed", "3"))
    again = _json_lines(_run(capsys, *args, *draw, "--seed", "3"))
    assert first == again
    assert all(len(r["nbest"]) == 4 for r in first)
    assert len({n["translation"] for r in first for n in r["nbest"]}) > 3
    # float32: bf16 log-probabilities tie often, and a draw among tied tokens need not be argmax's
    greedy = _json_lines(_run(capsys, *args, "--precision", "float32", "--beam", "1"))
    top1 = _json_lines(_run(capsys, *args, "--precision", "float32", "--sample", "--top-k", "1"))
    assert [(r["translation"], r["score"]) for r in top1] == [(r["translation"], r["score"]) for r in greedy]


def test_ensemble_of_one_model_twice_and_the_tokenizer_check(toy_run, tmp_path, toy_pairs, capsys):
    args = ["translate", "--device", "cpu", "--precision", "float32", "--json", *SENTENCES]
    single = _json_lines(_run(capsys, *args, "--model", str(toy_run)))
    twice = _json_lines(_run(capsys, *args, "--model", str(toy_run), "--model", str(toy_run)))
    assert [r["translation"] for r in twice] == [r["translation"] for r in single]
    assert [r["score"] for r in twice] == pytest.approx([r["score"] for r in single], abs=1e-3)
    other = tmp_path / "other"
    shutil.copytree(toy_run, other)
    vocab = Tokenizer.load(toy_run).src_vocab_size  # same size (the weights load), different pieces
    src, tgt = toy_pairs
    Tokenizer.train(src[::-1], tgt[::-1], vocab, True, "unigram", 0.9995).save(other)
    assert (other / "spm.model").read_bytes() != (toy_run / "spm.model").read_bytes()
    line = one_line_error(
        run_cli("translate", "--device", "cpu", "--model", str(toy_run), "--model", str(other), "你好。")
    )
    assert "tokenizer differs" in line and str(other) in line


def test_trace_json_and_table(toy_run, capsys):
    args = ["translate", "--model", str(toy_run), "--device", "cpu", "--beam", "3", "我很好。"]
    trace = json.loads(_run(capsys, *args, "--trace", "--json"))
    best = _json_lines(_run(capsys, *args, "--json"))[0]
    assert trace["best"]["translation"] == best["translation"]
    assert trace["best"]["score"] == pytest.approx(best["score"], abs=1e-3)
    assert [s["step"] for s in trace["steps"]] == list(range(1, len(trace["steps"]) + 1))
    assert len(trace["steps"][0]["live"]) == 3 and sum(len(s["ended"]) for s in trace["steps"]) >= 3
    table = _run(capsys, *args, "--trace")
    assert "penalised" in table and table.count(" live ") == sum(len(s["live"]) for s in trace["steps"])


@pytest.mark.parametrize("precision", ["float32", "bf16", "bf16 without AMX"])
def test_score_of_greedy_output_is_greedy_score(toy_run, tmp_path, capsys, monkeypatch, precision):
    """Compared where the output's text tokenizes back to the output's pieces (a 60-step toy model
    also emits runs of bare word boundaries, which detokenizing drops). Greedy's score counts <end>'s
    log-probability when it chose <end>, not when it stopped at the length limit. In bf16 the two
    commands run the same kernels on a CPU without AMX (measured: 2e-4 apart at most, where a bf16 softmax in
    either moves them 0.07 apart); with AMX a cached step's self-attention takes the fused kernel, the
    scorer's causal pass does not, and they differ by up to bf16's precision of a sentence's log-probability.
    "bf16 without AMX" sets the AMX kernels aside, so a machine with AMX checks the tight case too."""
    if precision == "bf16 without AMX":
        attention_as_without_amx(monkeypatch)
    tolerance = 5e-2 if precision == "bf16" and cpu_has_amx() else 2e-3
    precision = precision.split()[0]
    src = toy_run / "test.src"
    model = ["--model", str(toy_run), "--device", "cpu", "--precision", precision]
    greedy = _json_lines(_run(capsys, "translate", *model, "--beam", "1", "--json", "-i", str(src)))
    ref = write_lines(tmp_path / "ref.txt", [r["translation"] for r in greedy])
    scored = _json_lines(_run(capsys, "score", *model, "--src", str(src), "--ref", str(ref), "--json"))
    same_pieces = [(g, s) for g, s in zip(greedy, scored, strict=True) if s["tokens"] == [*g["tokens"], "<end>"]]
    assert len(same_pieces) >= 5
    cfg, tokenizer = load_config(toy_run / "config.yaml"), Tokenizer.load(toy_run)
    ended = 0
    for g, s in same_pieces:
        ids = torch.tensor([tokenizer.encode_src(g["source"])])
        (limit,) = length_limits(ids, cfg.decode.max_len_a, cfg.decode.max_len_b, cfg.model.max_positions).tolist()
        ended += len(g["tokens"]) < limit
        expected = greedy_score(s["token_log_probs"], len(g["tokens"]), limit)
        assert g["score"] == pytest.approx(expected, abs=tolerance), (g, s, limit)
    # Every compared output ends with <end> on the toy model: those the length limit stops do not tokenize back
    # to their own pieces, so the other branch is never taken here (tests/unit/decode/test_search.py has limits).
    assert ended >= 1
    for s in scored:
        assert s["log_prob"] == pytest.approx(sum(s["token_log_probs"]), abs=2e-3)
    text = _run(capsys, "score", *model, "--src", str(src), "--ref", str(ref))
    assert [float(line.split("\t")[0]) for line in text.splitlines()] == pytest.approx([s["log_prob"] for s in scored])


def test_evaluate_compares_hypothesis_files(toy_run, tmp_path, capsys):
    references = (toy_run / "test.tgt").read_text(encoding="utf-8").splitlines()
    good = write_lines(tmp_path / "good.txt", references[:60] + ["nothing"] * 40)
    poor = write_lines(tmp_path / "poor.txt", references[:20] + ["nothing"] * 80)
    args = ["evaluate", "--ref", str(toy_run / "test.tgt"), "--bootstrap", "200", "--trials", "500"]
    result = json.loads(_run(capsys, *args, "--hyp", str(poor), "--hyp", str(good), "--json"))
    assert result["sentences"] == 100 and [s["name"] for s in result["systems"]] == [str(poor), str(good)]
    baseline, better = result["systems"]
    for metric in ("BLEU", "chrF", "chrF++"):
        assert better[metric]["score"] > baseline[metric]["score"]
        assert baseline[metric]["p_bootstrap"] is None and better[metric]["p_bootstrap"] < 0.05
        assert better[metric]["p_randomization"] < 0.05 and better[metric]["ci"] > 0
        # the difference's interval: above zero here, around the observed difference
        delta = better[metric]["score"] - baseline[metric]["score"]
        assert 0 < better[metric]["delta_low"] <= delta <= better[metric]["delta_high"]
        assert baseline[metric]["delta_low"] is None
    assert not better["identical_to_baseline"]
    table = _run(capsys, *args, "--hyp", str(poor), "--hyp", str(good), "--hyp", str(poor))
    assert table.count("| BLEU |") == 3 and "baseline" in table and table.count("same output") == 3 * 2


def test_evaluate_compare_runs(toy_run, capsys):
    args = ["evaluate", "--device", "cpu", "--beam", "1", "--bootstrap", "100", "--trials", "100", "--json"]
    result = json.loads(_run(capsys, *args, "--compare", str(toy_run), str(toy_run)))
    first, second = result["systems"]
    for metric in ("BLEU", "chrF", "chrF++"):
        assert first[metric]["score"] == second[metric]["score"]
    assert first["chrF"]["score"] > 0
    # sacrebleu (after MultEval) counts only shuffles with a strictly larger difference: a system
    # against itself gets the smallest p-value, 1 / (trials + 1); the comparison flags it
    assert second["BLEU"]["p_randomization"] == pytest.approx(1 / 101, abs=1e-4)
    assert [first["identical_to_baseline"], second["identical_to_baseline"]] == [True, True]
    assert second["BLEU"]["delta_low"] == second["BLEU"]["delta_high"] == 0


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--sample", "--beam", "3"], "--sample"),
        (["--sample", "--top-p", "1.5"], "--top-p"),
        (["--trace", "你好。"], "--trace"),
    ],
)
def test_bad_decoding_options_are_one_line_errors(toy_run, args, named):
    line = one_line_error(run_cli("translate", "--model", str(toy_run), "--device", "cpu", *args, "我很好。"))
    assert named in line


def test_bad_glossary_compare_and_score_inputs_are_one_line_errors(toy_run, tmp_path):
    terms = write_lines(tmp_path / "terms.tsv", ["北京\tBeijing", "上海 Shanghai"])
    line = one_line_error(
        run_cli("translate", "--model", str(toy_run), "--device", "cpu", "--glossary", str(terms), "你好。")
    )
    assert "terms.tsv:2" in line
    line = one_line_error(run_cli("evaluate", "--compare", str(toy_run)))
    assert "--compare" in line and "two" in line
    short = write_lines(tmp_path / "short.txt", ["one line"])
    line = one_line_error(run_cli("score", "--model", str(toy_run), "--device", "cpu", "--ref", str(short)))
    assert line.endswith(f"{toy_run / 'test.src'} has 100 lines but {short} has 1")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sample", "--glossary", "terms.tsv"], "--glossary needs beam search: drop --sample"),
        (
            ["--prefix", "She", "--prefix-tsv"],
            "give either --prefix TEXT (one prefix for every sentence) or --prefix-tsv",
        ),
        (["--attention", "a.svg", "--model", "other"], "--attention shows one model's attention: give one --model"),
        (
            ["--engine", "ctranslate2", "--model", "other"],
            "--model needs ensembles, which the ctranslate2 engine lacks; use --engine torch",
        ),
        (["--engine", "ctranslate2", "--trace"], "--trace needs trace, which the ctranslate2 engine lacks"),
    ],
    ids=["glossary-sample", "prefix-prefix-tsv", "attention-two-models", "ensemble-ctranslate2", "trace-ctranslate2"],
)
def test_options_that_cannot_go_together_are_one_line_errors_before_loading(tmp_path, capsys, args, message):
    """Checked before any model loads: the models named here do not exist."""
    line = main_error(capsys, "translate", "--model", str(tmp_path / "model"), "--device", "cpu", *args, "你好。")
    assert message in line


def test_a_paragraph_is_one_line_out_translated_sentence_by_sentence(toy_run, capsys):
    model = ["translate", "--model", str(toy_run), "--device", "cpu", "--beam", "1"]
    first, second = _run(capsys, *model, SENTENCES[0]).strip(), _run(capsys, *model, SENTENCES[1]).strip()
    both = _run(capsys, *model, SENTENCES[0] + SENTENCES[1], "", SENTENCES[1])
    assert both.split("\n") == [f"{first} {second}", "", second, ""]
    whole = _json_lines(_run(capsys, *model, "--no-split", "--json", SENTENCES[0] + SENTENCES[1]))[0]
    assert "sentences" not in whole  # one unit, translated whole


def test_target_language_input_passes_through_said_on_stderr_and_in_json(toy_run, capsys):
    model = ["translate", "--model", str(toy_run), "--device", "cpu", "--beam", "1"]
    english = "The weather is nice today."
    main([*model, english, SENTENCES[0]])
    said = capsys.readouterr()
    assert said.out.split("\n")[0] == english
    passed = "already in the target language (en): passed through unchanged (--force translates)"
    assert said.err.strip() == f'seq2seq: line 1, "{english}": {passed}'
    (record,) = _json_lines(_run(capsys, *model, "--json", english))
    assert record["translation"] == english and record["confidence"] is None
    assert record["warnings"] == [passed]
    assert record["sentences"][0]["translated"] is False and record["sentences"][0]["language"] == "en"
    (forced,) = _json_lines(_run(capsys, *model, "--json", "--force", english))
    assert forced["warnings"] == [] and forced["confidence"] is not None
