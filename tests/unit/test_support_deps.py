"""tests/support/deps.py: a missing optional dependency skips locally, fails in CI."""

from __future__ import annotations

import pytest

from tests.support.deps import need, required

MISSING = "tasuki_test_module_that_is_not_installed"


@pytest.fixture
def local(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("TASUKI_REQUIRE_ALL", raising=False)


@pytest.mark.usefixtures("local")
def test_a_missing_module_skips_on_a_developers_machine() -> None:
    assert not required()
    with pytest.raises(pytest.skip.Exception, match=MISSING):
        need(MISSING)


@pytest.mark.usefixtures("local")
@pytest.mark.parametrize(("name", "value"), [("CI", "true"), ("TASUKI_REQUIRE_ALL", "1")])
def test_a_missing_module_fails_in_ci(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    assert required()
    with pytest.raises(pytest.fail.Exception, match=r"pip install -e '\.\[dev\]'"):
        need(MISSING)


@pytest.mark.usefixtures("local")
def test_a_present_module_is_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "false")
    assert not required()
    assert need("json").dumps([1]) == "[1]"
