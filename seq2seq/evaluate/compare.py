"""Comparing systems on one test set: BLEU, chrF and chrF++ of each with a 95% confidence interval,
and whether each differs from the first (the baseline) by more than chance, with sacrebleu's own
paired tests (paired bootstrap resampling and approximate randomization, Koehn 2004; Riezler &
Maxwell 2005), and a 95% interval of each difference from the baseline over the paired bootstrap's
own resamples. sacrebleu seeds them (``SACREBLEU_SEED``, default 12345), so a re-run gives the
same figures.
"""

import os
from dataclasses import dataclass

import numpy as np
from sacrebleu.metrics import CHRF
from sacrebleu.metrics.base import Metric
from sacrebleu.significance import PairedTest

from seq2seq.errors import UserError
from seq2seq.evaluate.metrics import DEFAULT_TOKENIZER, References, bleu_metric, reference_streams

METRICS = ("BLEU", "chrF", "chrF++")


@dataclass
class MetricResult:
    """One metric of one system: the corpus score, the bootstrap mean and 95% CI half-width, the
    p-values of the two paired tests against the baseline and the 95% interval of the difference
    from it (None for the baseline itself)."""

    score: float
    mean: float
    ci: float
    p_bootstrap: float | None
    p_randomization: float | None
    delta_low: float | None
    delta_high: float | None


@dataclass
class Comparison:
    """Systems in the order given (the first is the baseline), per system a result per metric."""

    sentences: int
    systems: list[str]
    results: list[dict[str, MetricResult]]
    signatures: dict[str, str]
    # Line for line the baseline's output: sacrebleu's tests count only resamples with a strictly
    # larger difference, so such a system gets the smallest p-value; the table says "same output".
    identical: list[bool]

    def to_dict(self) -> dict:
        """JSON-ready: {sentences, signatures, systems: [{name, BLEU: {score, mean, ci, p_bootstrap, ...}}]}."""
        return {
            "sentences": self.sentences,
            "signatures": self.signatures,
            "systems": [
                {
                    "name": name,
                    "identical_to_baseline": same,
                    **{m: {k: _round(v) for k, v in vars(r[m]).items()} for m in METRICS},
                }
                for name, r, same in zip(self.systems, self.results, self.identical, strict=True)
            ],
        }

    def table(self) -> str:
        """A Markdown table: one row per metric and system."""
        lines = [
            "| metric | system | score | Δ | Δ 95% interval | bootstrap mean ± 95% CI "
            "| p (paired bootstrap) | p (approx. rand.) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for metric in METRICS:
            base = self.results[0][metric].score
            for k, (name, results) in enumerate(zip(self.systems, self.results, strict=True)):
                r = results[metric]
                if k == 0 or self.identical[k]:
                    p_bs = p_ar = "baseline" if k == 0 else "same output"
                else:
                    p_bs, p_ar = f"{r.p_bootstrap:.4f}", f"{r.p_randomization:.4f}"
                delta = "" if k == 0 else f"{r.score - base:+.2f}"
                interval = "" if k == 0 else f"[{r.delta_low:+.2f}, {r.delta_high:+.2f}]"
                lines.append(
                    f"| {metric} | {name} | {r.score:.2f} | {delta} | {interval} | {r.mean:.2f} ± {r.ci:.2f} "
                    f"| {p_bs} | {p_ar} |"
                )
        return "\n".join(lines) + "\n"


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)


def compare(
    systems: list[tuple[str, list[str]]],
    references: References,
    bootstrap: int = 1000,
    trials: int = 10000,
    tokenize: str = DEFAULT_TOKENIZER,
) -> Comparison:
    """Score ``systems`` (name, detokenized lines) against one reference each (or several reference
    streams), BLEU tokenized by ``tokenize``, and test each against the first: ``bootstrap`` resamples
    (CIs and paired bootstrap), ``trials`` for approximate randomization."""
    if len(systems) < 2:
        raise UserError("a comparison needs at least two systems (--compare RUN_A RUN_B or --hyp A --hyp B)")
    refs = reference_streams(references)
    for name, lines in systems:
        for stream in refs:
            if len(lines) != len(stream):
                raise UserError(f"{name}: {len(lines)} translations but {len(stream)} references; they must be aligned")
    results: list[dict[str, MetricResult]] = [{} for _ in systems]
    signatures: dict[str, str] = {}
    bs_sigs, bs = PairedTest(systems, _metrics(tokenize), refs, test_type="bs", n_samples=bootstrap)()
    ar_sigs, ar = PairedTest(systems, _metrics(tokenize), refs, test_type="ar", n_samples=trials, n_ar_confidence=-1)()
    # sacrebleu names the columns after its metrics' own names (BLEU, chrF2, chrF2++), in our order
    for metric, bs_key, ar_key in zip(
        METRICS, [k for k in bs if k != "System"], [k for k in ar if k != "System"], strict=True
    ):
        for k in range(len(systems)):
            b, a = bs[bs_key][k], ar[ar_key][k]
            low, high = None, None
            if k > 0:
                low, high = _delta_interval(_metrics(tokenize)[metric], systems[0][1], systems[k][1], refs, bootstrap)
            results[k][metric] = MetricResult(b.score, b.mean, b.ci, b.p_value, a.p_value, low, high)
        signatures[metric] = f"{bs_sigs[bs_key]} | ar:{trials}"
    identical = [lines == systems[0][1] for _, lines in systems]
    return Comparison(len(refs[0]), [name for name, _ in systems], results, signatures, identical)


def _delta_interval(
    scorer: Metric, baseline: list[str], system: list[str], refs: list[list[str]], samples: int
) -> tuple[float, float]:
    """95% interval (2.5th and 97.5th percentiles) of ``scorer``(system) − ``scorer``(baseline) over
    ``samples`` paired bootstrap resamples of the sentences.

    The resamples are those of sacrebleu's paired bootstrap test (its seed, drawn the same way), and
    each is scored from sacrebleu's per-sentence sufficient statistics, as that test does: a
    difference whose interval excludes 0 is one the test finds significant at about p < 0.05.
    """
    seed = os.environ.get("SACREBLEU_SEED", "12345")
    rng = np.random.default_rng(None if seed.lower() == "none" else int(seed))
    index = rng.choice(len(baseline), size=(samples, len(baseline)), replace=True)  # (samples, N)
    resampled = []
    for lines in (baseline, system):
        stats = np.array(scorer._extract_corpus_statistics(lines, refs), dtype="float32")  # (N, statistics)
        resampled.append(np.array([scorer._compute_score_from_stats(s.sum(0)).score for s in stats[index]]))
    low, high = np.percentile(resampled[1] - resampled[0], [2.5, 97.5])
    return float(low), float(high)


def _metrics(tokenize: str) -> dict[str, Metric]:
    """Fresh metric objects (sacrebleu's tests cache reference statistics inside them)."""
    return {"BLEU": bleu_metric(tokenize), "chrF": CHRF(), "chrF++": CHRF(word_order=2)}
