"""Anthropic's Messages API (messages.py), a translation to and from the chat pipeline."""
