"""The console's secrets: from a variable or from the file its ``_FILE`` variable names (a Docker
secret, as compose gives them); without a session key it does not start."""

from __future__ import annotations

from pathlib import Path

import pytest

from surveil.console.config import ConfigError, ConsoleConfig


def test_the_secrets_come_from_their_files(tmp_path: Path) -> None:
    (tmp_path / "key").write_text("k" * 40 + "\n")
    (tmp_path / "token").write_text("t" * 40 + "\n")
    config = ConsoleConfig.from_env(
        {"CONSOLE_SECRET_KEY_FILE": str(tmp_path / "key"), "ALERTMANAGER_WEBHOOK_TOKEN_FILE": str(tmp_path / "token")}
    )
    assert (config.secret_key, config.webhook_token) == ("k" * 40, "t" * 40)


def test_a_variable_wins_over_a_file_and_no_key_at_all_refuses_to_start(tmp_path: Path) -> None:
    (tmp_path / "key").write_text("f" * 40)
    assert ConsoleConfig.from_env({"CONSOLE_SECRET_KEY": "v" * 40, "CONSOLE_SECRET_KEY_FILE": str(tmp_path / "key")}).secret_key == "v" * 40
    with pytest.raises(ConfigError, match="CONSOLE_SECRET_KEY"):
        ConsoleConfig.from_env({})
    (tmp_path / "empty").touch()
    with pytest.raises(ConfigError, match="CONSOLE_SECRET_KEY"):
        ConsoleConfig.from_env({"CONSOLE_SECRET_KEY_FILE": str(tmp_path / "empty")})
