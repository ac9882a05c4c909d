"""A transcript in a real browser: its projection, a dry run, apply, and the task's progress page."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from ingest.ingestion import ingest
from memoryui.models import Memory

pytestmark = pytest.mark.e2e


def test_a_dry_run_then_apply_extracts_and_the_task_page_shows_it(signed_in, live_server, indexes, screenshot):
    page = signed_in
    transcript = ingest(
        {
            "scope": "agent:main",
            "title": "onboarding chat",
            "messages": [
                {"role": "user", "content": "我叫东升,幸运数字是 88"},
                {"role": "assistant", "content": "记住了。"},
                {"role": "user", "content": "在吗?"},
                {"role": "assistant", "content": "在。"},
                {"role": "user", "content": "我的手机号是 13800138000"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": "c1", "name": "crm::save", "arguments": "{}"}],
                },
            ],
        }
    ).transcript
    page.goto(f"{live_server.url}/transcripts/")
    page.get_by_role("link", name="onboarding chat").click()
    expect(page.locator("[data-trimmed]")).to_have_count(1)
    expect(page.locator("[data-in-flight]").first).to_be_visible()

    page.locator('[data-action="dry-run"]').click()
    expect(page.locator("[data-dry-run]")).to_contain_text("2 would be added")
    expect(page.locator('[data-message="0"] [data-outcome="added"]')).to_have_count(2)
    expect(page.locator('[data-message="2"] [data-outcome="skipped"]')).to_contain_text("not knowledge")
    expect(page.locator('[data-message="4"] [data-outcome="skipped"]')).to_contain_text("in-flight round")
    assert not Memory.objects.exists()
    screenshot("dry-run")

    page.locator('[data-action="extract"]').click()
    page.wait_for_url(re.compile(r".*/tasks/[0-9a-f-]{36}/$"))
    expect(page.locator("[data-task-status]")).to_have_attribute("data-task-status", "succeeded")
    expect(page.locator("[data-counts]")).to_contain_text("added 2")
    screenshot("task")
    assert sorted(Memory.objects.values_list("entity_key", flat=True)) == ["lucky_number:88", "name:东升"]
    page.goto(f"{live_server.url}{transcript.get_absolute_url()}")
    expect(page.locator('[data-message="0"] [data-outcome="added"] a')).to_have_count(2)
