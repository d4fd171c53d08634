"""A test run that skips any test fails, unless DUCTWORK_ALLOW_SKIPS=1 says skips are fine."""

from __future__ import annotations

import pytest

from tests.conftest import ALLOW_SKIPS

pytest_plugins = ["pytester"]

# The inner runs use the suite's own hook, imported from the suite's conftest.
CONFTEST = "from tests.conftest import pytest_sessionfinish  # noqa: F401\n"
SKIPS = """
import pytest

def test_passes():
    pass

def test_skips():
    pytest.skip("the tool it needs is missing")
"""
PASSES = """
def test_passes():
    pass
"""


def run(pytester: pytest.Pytester, tests: str) -> pytest.RunResult:
    """Run ``tests`` in-process with the suite's session hook."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner=tests)
    return pytester.runpytest("-p", "no:cacheprovider")


def test_a_skipped_test_fails_the_run_and_says_why(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ALLOW_SKIPS, raising=False)
    result = run(pytester, SKIPS)
    result.assert_outcomes(passed=1, skipped=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"*1 skipped: the run fails unless {ALLOW_SKIPS}=1*"])


@pytest.mark.parametrize("value", ["0", "yes", ""])
def test_only_1_allows_skips(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(ALLOW_SKIPS, value)
    assert run(pytester, SKIPS).ret == pytest.ExitCode.TESTS_FAILED


def test_allow_skips_lets_a_run_with_skips_pass(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ALLOW_SKIPS, "1")
    result = run(pytester, SKIPS)
    result.assert_outcomes(passed=1, skipped=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.no_fnmatch_line(f"*the run fails unless {ALLOW_SKIPS}*")


def test_a_run_without_skips_passes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ALLOW_SKIPS, raising=False)
    result = run(pytester, PASSES)
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
