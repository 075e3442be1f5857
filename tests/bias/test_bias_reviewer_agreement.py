"""Council sessions record each reviewer's agreement with the consensus (Kendall's τ_b, checked
against scipy, and top-1), and the bias report gains the reviewers' agreement matrix and the
agreement-based n_eff over the stored sessions, on both backends and in text, JSON and HTML."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import write_config
from rich.console import Console
from scipy.stats import kendalltau

from council import Council
from council.bias.html import render_html
from council.bias.report import bias_report
from council.bias.wording import render_bias_report_text
from council.cli.main import cli

MEMBERS = ["fake/alpha", "fake/beta", "fake/gamma", "fake/delta"]
SPEC = {"councils": {"default": {"members": MEMBERS, "chairman": MEMBERS[0]}}}


async def _sessions(store, n):
    council = Council.from_config(SPEC, store=store)
    results = [await council.run(f"Question {i}?", seed=i) for i in range(n)]
    await council.aclose()
    return results


async def test_each_reviewers_tau_with_the_consensus_is_scipys(store_backend):
    (result,) = await _sessions(store_backend, 1)
    ranks = {e.member: e.rank for e in result.consensus.ranking}
    rankings = {r.reviewer: r.ranking for r in result.reviews if r.valid}
    by = {(a.reviewer, a.other): a for a in result.bias.reviewer_agreement}
    for reviewer, ranking in rankings.items():
        common = [m for m in ranking if m in ranks]
        expected = kendalltau([ranking.index(m) for m in common], [ranks[m] for m in common]).statistic
        got = by[(reviewer, None)]
        assert got.items == len(common)
        assert got.kendall_tau == pytest.approx(expected) if expected == expected else got.kendall_tau is None
        assert got.top1 == (ranks[ranking[0]] == 1)
    stored = json.loads(store_backend.get_session(result.session_id)["result"])["bias"]["reviewer_agreement"]
    assert len(stored) == len(result.bias.reviewer_agreement) and all("text" not in a for a in stored)


async def test_the_bias_report_gains_the_agreement_matrix_and_n_eff(store_backend):
    results = await _sessions(store_backend, 4)
    report = bias_report(store_backend)
    agreement = report.reviewer_agreement
    assert agreement is not None and agreement.basis == "agreement" and "not label-based" in agreement.note
    pairs: dict[tuple[str, str], list[float]] = {}
    for r in results:
        for a in r.bias.reviewer_agreement:
            if a.other is not None and a.kendall_tau is not None:
                pairs.setdefault(tuple(sorted((a.reviewer, a.other))), []).append(a.kendall_tau)
    k = len(agreement.matrix)
    for (x, y), taus in pairs.items():
        assert agreement.matrix[x][y] == agreement.matrix[y][x] == pytest.approx(sum(taus) / len(taus))
    rho = sum(sum(t) / len(t) for t in pairs.values()) / len(pairs)  # each pair twice in the matrix: same mean
    assert agreement.mean_agreement == pytest.approx(rho)
    assert agreement.n_eff == pytest.approx(k / (1 + (k - 1) * rho))
    assert all(r.sessions == 4 for r in agreement.reviewers.values())
    text = Console(record=True, width=200)
    render_bias_report_text(report, text)
    said = text.export_text()
    assert "Agreement with the consensus" in said and "Effective number of reviewers" in said
    assert "agreement-based, not label-based" in said
    page = render_html(report)
    assert "<h2>Reviewer agreement</h2>" in page and "not label-based" in page
    assert json.loads(report.model_dump_json())["reviewer_agreement"]["k"] == k


def test_the_cli_reports_it_and_a_report_without_sessions_leaves_the_key_out(tmp_path, council_home):
    assert "reviewer_agreement" not in json.loads(CliRunner().invoke(cli, ["bias-report", "--json"]).stdout or "{}")
    config = write_config(tmp_path / "c.toml", {n: {"model": f"fake/{n}"} for n in ("a", "b", "c")}, chairman="a")
    ran = CliRunner().invoke(cli, ["run", "Why is the sky blue?", "--config", str(config), "--json"])
    assert ran.exit_code == 0, ran.output
    report = CliRunner().invoke(cli, ["bias-report", "--json"])
    assert report.exit_code == 0, report.output
    assert json.loads(report.stdout)["reviewer_agreement"]["basis"] == "agreement"
    text = CliRunner().invoke(cli, ["bias-report"])
    assert "Reviewers' agreement" in text.stdout
