"""The preview page (page.py, off unless --enable-preview): what a model would be shown of one
video, drawn as a contact sheet (sheet.py) with the echo engine's account of it."""
