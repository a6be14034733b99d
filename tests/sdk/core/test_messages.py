"""Every message says what failed, the value and what to do: never ``got ''`` or ``got None`` (issue 17's
cosmetics), through the one place the text is made (``ConfigError``)."""

from __future__ import annotations

from malaunch.sdk import BackendNotAvailable, ConfigError, SpecError


def test_an_empty_or_missing_value_is_said_in_words() -> None:
    assert (
        str(ConfigError("job id is empty", "", "give a job id")) == "job id is empty, got an empty value; give a job id"
    )
    assert (
        str(ConfigError("name has only blanks", "  ", "fix it"))
        == "name has only blanks, got only blanks ('  '); fix it"
    )
    missing = SpecError("resources.flavor", "is required for the modelarts backend", None, "set it")
    assert str(missing) == "resources.flavor: is required for the modelarts backend; set it"
    assert str(ConfigError("bad port", 0, "use 1-65535")) == "bad port, got 0; use 1-65535"
    for error in (ConfigError("x", "", "y"), missing):
        assert "got ''" not in str(error) and "got None" not in str(error)


def test_a_backend_that_is_not_installed_says_how_to_install_it() -> None:
    text = str(BackendNotAvailable("volcano", "local, modelarts"))
    assert "in this release" not in text and "not installed" in text and "malaunch[volcano]" in text
