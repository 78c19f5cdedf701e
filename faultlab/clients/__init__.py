"""Reference clients on the official google-genai SDK."""
