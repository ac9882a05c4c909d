"""Recall with a local LLM: the page the playground's Selector column links to when no LLM is
configured, and the README section of the same name (its stable anchor, the variables it names)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings as django_settings

pytestmark = pytest.mark.django_db

README = Path(django_settings.BASE_DIR) / "README.md"
VARIABLES = ("MEMORYUI_LLM_BASE_URL", "MEMORYUI_LLM_MODEL", "MEMORYUI_LLM_API_KEY", "MEMORYUI_SELECTOR_TIMEOUT_MS")
SERVERS = ("http://127.0.0.1:11434/v1", "llama-server", "vllm serve")


def readme_section() -> str:
    """From the anchor the UI links to, up to the next section."""
    text = README.read_text(encoding="utf-8")
    start = text.index('<a id="local-llm"></a>\n## Recall with a local LLM\n')
    return text[start : text.index("\n## ", start + len('<a id="local-llm"></a>\n'))]


def test_the_readme_has_the_section_the_ui_links_to():
    section = readme_section()
    for needed in (*VARIABLES, *SERVERS, "selector", "L1 extractor"):
        assert needed in section, needed


def test_without_an_llm_the_page_says_so_and_how_to_set_one_up(alice_client, settings):
    settings.MEMORYUI_LLM_BASE_URL = settings.MEMORYUI_LLM_MODEL = None
    page = alice_client.get("/recall/llm/").content.decode()
    assert 'id="local-llm"' in page and 'data-llm-state="not_configured"' in page
    for needed in (*VARIABLES, *SERVERS):
        assert needed in page, needed


def test_with_an_llm_the_page_names_it_without_any_secret(alice_client, settings):
    settings.MEMORYUI_LLM_BASE_URL = "http://user:hunter2@127.0.0.1:11434/v1"
    settings.MEMORYUI_LLM_MODEL = "qwen2.5:7b-instruct"
    settings.MEMORYUI_LLM_API_KEY = "sk-secret-key"
    page = alice_client.get("/recall/llm/").content.decode()
    assert 'data-llm-state="configured"' in page and "qwen2.5:7b-instruct" in page
    assert "http://127.0.0.1:11434/v1" in page and "(with an API key)" in page
    assert "hunter2" not in page and "sk-secret-key" not in page


def test_the_page_needs_a_login(client):
    assert client.get("/recall/llm/").status_code == 302
