"""Test-session setup: real model requests are forbidden (loopback servers only)."""

import os

os.environ["RETINUE_BLOCK_REAL_MODELS"] = "1"
os.environ.pop("OPENAI_API_KEY", None)
os.environ.pop("ANTHROPIC_API_KEY", None)
