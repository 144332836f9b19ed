"""Anthropic's Messages API (api_router.py): its answers and events (messages.py); its request
is common/messages_protocol.py."""
