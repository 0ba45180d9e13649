"""Settings: one table, read from KB_* variables, flags win, documented in one place."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.config import SETTINGS, Settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_every_setting_is_documented():
    text = DOC.read_text()
    for setting in SETTINGS:
        assert f"`{setting.env}`" in text, setting.env
        if setting.flag:
            assert f"`{setting.flag}`" in text, setting.flag


def test_environment_then_overrides():
    settings = Settings.from_env({"KB_DATABASE_URL": "sqlite:///x.db", "KB_SEED": "0",
                                  "KB_MAX_UPLOAD_MB": "5", "KB_API_TOKENS": "a, b,",
                                  "KB_PORT": "9000"}, port=9100, host=None)
    assert settings.database_url == "sqlite:///x.db"
    assert settings.seed is False
    assert settings.max_upload_bytes == 5 * 1024 * 1024
    assert settings.api_tokens == ("a", "b")
    assert settings.port == 9100 and settings.host == "127.0.0.1"
    assert Settings.from_env(settings.to_env()) == settings


def test_defaults_embedded_sqlite(monkeypatch, tmp_path):
    monkeypatch.setenv("KB_DATA_DIR", str(tmp_path))
    settings = Settings.from_env({})
    assert settings.database_url == f"sqlite:///{tmp_path / 'kb.sqlite3'}"
    assert settings.max_upload_mb == 256 and settings.seed is True and settings.workers == 1


@pytest.mark.parametrize("env", [{"KB_SEED": "maybe"}, {"KB_PORT": "http"}, {"KB_MAX_UPLOAD_MB": "0"}])
def test_bad_values_name_the_variable(env):
    with pytest.raises(ValueError, match=next(iter(env))):
        Settings.from_env(env)
