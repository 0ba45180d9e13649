"""Crash KB: a crash knowledge base for LLM inference engines."""

__version__ = "0.1.0"
