"""Tests of the OpenAI-compatible provider, one file per concern."""
