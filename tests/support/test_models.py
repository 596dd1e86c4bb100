"""Chat messages in the OpenAI shape."""

from __future__ import annotations

from kairox.support.models import ChatMessage, to_openai_messages


def test_to_openai_keeps_role_content_and_name():
    assert ChatMessage("user", "hi").to_openai() == {"role": "user", "content": "hi"}
    assert ChatMessage("assistant", "s", name="summary").to_openai() == {
        "role": "assistant",
        "content": "s",
        "name": "summary",
    }


def test_a_tool_message_becomes_an_assistant_message_naming_the_tool():
    assert ChatMessage("tool", "42 files", name="ls").to_openai() == {
        "role": "assistant",
        "content": "[tool ls returned]\n42 files",
    }


def test_list_form():
    messages = [ChatMessage("system", "be brief"), ChatMessage("user", "why?")]
    assert to_openai_messages(messages) == [m.to_openai() for m in messages]
    assert [m["role"] for m in to_openai_messages(messages)] == ["system", "user"]
